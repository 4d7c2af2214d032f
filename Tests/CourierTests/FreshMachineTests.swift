import Foundation
import Testing

/// What a newcomer meets first: the README's first command on a machine without libcurl's
/// headers, and a package of their own that depends on Courier. Each builds Courier anew in a
/// folder of its own (minutes), so `scripts/test` runs this suite after the others, on its own.
///
/// A fresh machine is made honestly but not wholly: the test runs the demo in a mount and
/// network namespace of its own (`unshare -m -n`, as root) where libcurl's header directory is
/// covered by an empty tmpfs, so the compiler cannot find `curl/curl.h`, exactly as before
/// `libcurl4-openssl-dev` is installed. The packages themselves stay installed (the test cannot
/// uninstall them for the rest of the suite), so `apt-get` is a stand-in on `PATH` that records
/// its arguments and, for `install`, lifts the cover: what the demo then builds against is the
/// real header set that the real install would have put there.
@Suite(.serialized) struct FreshMachineTests {
    static let root = TestServers.repositoryRoot

    /// Where libcurl's headers are on this machine.
    static var curlHeaders: String? {
        ["/usr/include/x86_64-linux-gnu/curl", "/usr/include/aarch64-linux-gnu/curl", "/usr/include/curl"].first {
            FileManager.default.fileExists(atPath: $0 + "/curl.h")
        }
    }

    /// Whether this process may make mount namespaces (root, and a kernel that allows it).
    static var canCoverHeaders: Bool {
        guard let headers = curlHeaders else { return false }
        let probe = try? CLITests.runBlocking(
            URL(fileURLWithPath: "/usr/bin/env"), ["unshare", "-m", "mount", "-t", "tmpfs", "none", headers])
        return probe?.status == 0
    }

    /// A folder of its own under the run's temporary directory.
    static func folder(_ name: String) throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("\(name)-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }

    /// A stand-in `apt-get` in `bin`: records each call in `log`; `install` lifts the cover
    /// from `headers` when `lifts`.
    static func fakeAptGet(in bin: URL, log: URL, headers: String, lifts: Bool) throws {
        let script = """
            #!/bin/sh
            echo "apt-get $*" >>'\(log.path)'
            if [ "$1" = install ] && \(lifts ? "true" : "false"); then umount '\(headers)'; fi
            exit 0
            """
        let file = bin.appendingPathComponent("apt-get")
        try script.write(to: file, atomically: true, encoding: .utf8)
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: file.path)
    }

    /// `scripts/demo` with libcurl's headers covered, apt-get replaced, the network cut off.
    static func demoOnAFreshMachine(lifts: Bool) async throws -> (CLITests.Run, apt: String) {
        let headers = try #require(curlHeaders)
        let work = try folder("fresh-demo")
        let bin = work.appendingPathComponent("bin")
        try FileManager.default.createDirectory(at: bin, withIntermediateDirectories: true)
        let log = work.appendingPathComponent("apt.log")
        try fakeAptGet(in: bin, log: log, headers: headers, lifts: lifts)
        let demo = root.appendingPathComponent("scripts/demo").path
        let run = try await CLITests.run(
            URL(fileURLWithPath: "/usr/bin/env"),
            [
                "unshare", "-m", "-n", "sh", "-c",
                "mount -t tmpfs none \"$1\" && ip link set lo up && exec \"$0\"", demo, headers,
            ],
            in: root,
            environment: [
                "PATH": bin.path + ":" + (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"),
                "COURIER_BUILD_PATH": work.appendingPathComponent("build").path,
            ])
        let apt = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
        return (run, apt)
    }

    @Test(.enabled(if: canCoverHeaders))
    func theDemoInstallsLibcurlsHeadersBuildsAndPassesItsChecks() async throws {
        let (run, apt) = try await Self.demoOnAFreshMachine(lifts: true)
        #expect(run.status == 0, "\(run.stderr)")
        #expect(run.stdout.contains("installing libcurl4-openssl-dev zlib1g-dev"))
        #expect(apt.contains("apt-get install -y -qq --no-install-recommends libcurl4-openssl-dev zlib1g-dev"))
        #expect(run.stdout.contains("Building the courier command"))
        #expect(run.stdout.contains("Done: a GET, a JSON POST, a download, a resumed download and an upload"))
    }

    @Test(.enabled(if: canCoverHeaders))
    func aDemoThatStillLacksTheHeadersSaysWhatToInstall() async throws {
        let (run, apt) = try await Self.demoOnAFreshMachine(lifts: false)
        #expect(run.status == 1)
        #expect(apt.contains("install"))
        #expect(run.stderr.contains("headers are still missing after the install: install libcurl4-openssl-dev"))
    }

    /// `Examples/Consumer` depends on Courier by path and builds with `swift build` alone.
    @Test func aPackageThatDependsOnCourierBuildsAndMakesARequest() async throws {
        let fault = try await TestServers.fault()
        let build = try Self.folder("consumer-build")
        let package = Self.root.appendingPathComponent("Examples/Consumer").path
        let swift = URL(fileURLWithPath: "/usr/bin/env")
        let built = try await CLITests.run(
            swift,
            [
                "swift", "build", "--package-path", package, "--scratch-path", build.path, "--product",
                "courier-consumer",
            ])
        #expect(built.status == 0, "\(built.stdout)\n\(built.stderr)")
        let binary = build.appendingPathComponent("debug/courier-consumer")
        let run = try await CLITests.run(binary, [fault.appendingPathComponent("echo").absoluteString])
        #expect(run.stdout == "200 GET from=consumer\n", "\(run.stderr)")
        // Without libcurl's pkg-config file, SwiftPM says which package provides it.
        if Self.canCoverHeaders {
            let hinted = try await CLITests.run(
                swift,
                [
                    "unshare", "-m", "sh", "-c",
                    "mount -t tmpfs none /usr/lib/x86_64-linux-gnu/pkgconfig && exec \"$@\"",
                    "sh", "swift", "build", "--package-path", package, "--scratch-path", build.path, "--product",
                    "courier-consumer",
                ])
            #expect(
                (hinted.stdout + hinted.stderr).contains("apt-get install libcurl4-openssl-dev"), "\(hinted.stderr)")
        }
    }
}
