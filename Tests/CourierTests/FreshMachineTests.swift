import Courier
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

    /// The tree as a release: a copy of its files (tracked, and new ones not ignored) in a
    /// git repository of its own under the run's temporary directory, committed and tagged
    /// `CourierInfo.version`, as main is tagged when it is released. The shared repository and
    /// its tags are never touched.
    static func releaseRepository() async throws -> (repository: URL, version: String) {
        let work = try folder("release")
        let repository = work.appendingPathComponent("Courier")
        try FileManager.default.createDirectory(at: repository, withIntermediateDirectories: true)
        let version = CourierInfo.version
        try await shell(
            """
            git -C "$0" ls-files -z --cached --others --exclude-standard \
                | tar -C "$0" --null --ignore-failed-read -T - -cf - | tar -C "$1" -xf -
            cd "$1" && git init -q && git add -A \
                && git -c user.name=release -c user.email=release@example.invalid commit -qm "Courier $2" \
                && git tag "$2"
            """, root.path, repository.path, version)
        return (repository, version)
    }

    /// Runs `script` with `sh -c` and `arguments` as $0, $1...; fails on a nonzero exit.
    @discardableResult
    static func shell(
        _ script: String, _ arguments: String..., environment: [String: String] = [:]
    ) async throws
        -> CLITests.Run
    {
        let run = try await CLITests.run(
            URL(fileURLWithPath: "/bin/sh"), ["-c", script] + arguments, environment: environment)
        guard run.status == 0 else { throw TestServerError("\(script) failed: \(run.stdout)\n\(run.stderr)") }
        return run
    }

    /// What a team does: a new package whose manifest depends on Courier `from:` its release
    /// tag, by URL. `Examples/Consumer` (which depends on Courier by path, so that it builds
    /// from the tree) is that package once its one `.package(path:)` line is replaced with
    /// `.package(url: "file://.../Courier.git", from: "<CourierInfo.version>")`, the URL a bare
    /// clone of the release repository. It resolves with an empty SwiftPM cache, builds in a
    /// folder of its own, and makes a request.
    @Test func aPackageThatDependsOnCourierFromItsReleaseTagBuildsAndMakesARequest() async throws {
        let fault = try await TestServers.fault()
        let (repository, version) = try await Self.releaseRepository()
        let bare = repository.deletingLastPathComponent().appendingPathComponent("Courier.git")
        try await Self.shell(#"git clone -q --bare "$0" "$1""#, repository.path, bare.path)
        let consumer = try Self.folder("consumer")
        let example = Self.root.appendingPathComponent("Examples/Consumer")
        try await Self.shell(#"cp -R "$0"/. "$1""#, example.path, consumer.path)
        let manifest = consumer.appendingPathComponent("Package.swift")
        let byPath = #".package(name: "Courier", path: "../..")"#
        let text = try String(contentsOf: manifest, encoding: .utf8)
        #expect(text.contains(byPath), "Examples/Consumer/Package.swift no longer depends on Courier by path")
        let fromTag = ".package(url: \"\(bare.absoluteString)\", from: \"\(version)\")"
        try text.replacingOccurrences(of: byPath, with: fromTag).write(to: manifest, atomically: true, encoding: .utf8)

        let build = consumer.appendingPathComponent(".build")
        let cache = consumer.appendingPathComponent(".swiftpm-cache")
        let swift = URL(fileURLWithPath: "/usr/bin/env")
        let swiftBuild = [
            "swift", "build", "--package-path", consumer.path, "--scratch-path", build.path, "--cache-path",
            cache.path, "--product", "courier-consumer",
        ]
        let built = try await CLITests.run(swift, swiftBuild)
        #expect(built.status == 0, "\(built.stdout)\n\(built.stderr)")
        let resolved = try String(contentsOf: consumer.appendingPathComponent("Package.resolved"), encoding: .utf8)
        #expect(resolved.contains("\"version\" : \"\(version)\""), "\(resolved)")
        let binary = build.appendingPathComponent("debug/courier-consumer")
        let run = try await CLITests.run(binary, [fault.appendingPathComponent("echo").absoluteString])
        #expect(run.stdout == "200 GET from=consumer\n", "\(run.stderr)")
        // Without libcurl's pkg-config file, SwiftPM says which package provides it.
        if Self.canCoverHeaders {
            let hinted = try await CLITests.run(
                swift,
                [
                    "unshare", "-m", "sh", "-c",
                    "mount -t tmpfs none /usr/lib/x86_64-linux-gnu/pkgconfig && exec \"$@\"", "sh",
                ] + swiftBuild)
            #expect(
                (hinted.stdout + hinted.stderr).contains("apt-get install libcurl4-openssl-dev"), "\(hinted.stderr)")
        }
    }

    /// `scripts/check-api` on a package of its own, released as 1.0.0 (the script reads the
    /// repository it sits in, whatever the package): it passes on the tree as released
    /// (compared for real, not skipped as unchanged), fails once a public function is removed
    /// or a closed enum gains a case, naming them (and not a `package` function removed with
    /// them, no user can call that, nor a new case of an enum documented as growing), and
    /// passes again once CHANGELOG.md's Unreleased section names the removal under `### Breaking`.
    /// A small package keeps the three comparisons to seconds; on Courier's own tree
    /// `scripts/test` runs the script against the latest tag.
    @Test func checkAPIFailsOnARemovedPublicFunctionUnlessTheChangelogNamesIt() async throws {
        let repository = try Self.folder("check-api")
        let scripts = repository.appendingPathComponent("scripts")
        let sources = repository.appendingPathComponent("Sources/Greeting")
        for folder in [scripts, sources] {
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        }
        try FileManager.default.copyItem(
            at: Self.root.appendingPathComponent("scripts/check-api"), to: scripts.appendingPathComponent("check-api"))
        let manifest = """
            // swift-tools-version:6.0
            import PackageDescription

            let package = Package(
                name: "Greeting",
                products: [.library(name: "Greeting", targets: ["Greeting"])],
                targets: [.target(name: "Greeting")]
            )

            """
        try manifest.write(to: repository.appendingPathComponent("Package.swift"), atomically: true, encoding: .utf8)
        let file = sources.appendingPathComponent("Greeting.swift")
        let farewell =
            "/// Says goodbye.\npublic func farewell() -> String { \"bye\" }\n"
            + "/// The package's own.\npackage func helper() -> String { \"help\" }\n"
        let enums =
            "/// A mood.\n///\n/// Minor releases may add cases.\npublic enum Mood { case happy }\n"
            + "/// A side.\npublic enum Side { case left, right }\n"
        try ("/// Says hello.\npublic func greeting() -> String { \"hello\" }\n" + enums + farewell)
            .write(to: file, atomically: true, encoding: .utf8)
        let changelog = repository.appendingPathComponent("CHANGELOG.md")
        try "# Changelog\n\n## [Unreleased]\n\n## [1.0.0] - 2026-11-28\n".write(
            to: changelog, atomically: true, encoding: .utf8)
        try await Self.shell(
            """
            cd "$0" && printf '.build/\\n' > .gitignore && git init -q && git add -A \
                && git -c user.name=release -c user.email=release@example.invalid commit -qm "Greeting 1.0.0" \
                && git tag 1.0.0
            """, repository.path)
        let script = scripts.appendingPathComponent("check-api")
        let environment = ["COURIER_CHECK_API_ALWAYS": "1"]

        let unchanged = try await CLITests.run(script, [], in: repository, environment: environment)
        #expect(unchanged.status == 0, "\(unchanged.stdout)\n\(unchanged.stderr)")
        #expect(unchanged.stdout.contains("no breaking change since 1.0.0"), "\(unchanged.stdout)")

        let source = try String(contentsOf: file, encoding: .utf8)
        // A case added to each enum: the growing one's is minor, the closed one's a break.
        try source.replacingOccurrences(of: farewell, with: "")
            .replacingOccurrences(of: "case happy", with: "case happy, sad")
            .replacingOccurrences(of: "case left, right", with: "case left, right, middle")
            .write(to: file, atomically: true, encoding: .utf8)
        let removed = try await CLITests.run(script, [], in: repository, environment: environment)
        #expect(removed.status == 1, "\(removed.stdout)\n\(removed.stderr)")
        let unnamed = "NOT NAMED: API breakage: func farewell() has been removed"
        #expect(removed.stdout.contains(unnamed), "\(removed.stdout)")
        let packageOnly = "package, not public (no user can call it): API breakage: func helper() has been removed"
        #expect(removed.stdout.contains(packageOnly), "\(removed.stdout)")
        #expect(
            removed.stdout.contains(
                "a new case of an enum documented as growing (minor): API breakage: enumelement Mood.sad"),
            "\(removed.stdout)")
        #expect(removed.stdout.contains("NOT NAMED: API breakage: enumelement Side.middle"), "\(removed.stdout)")
        #expect(
            removed.stderr.contains("does not name under '### Breaking': Side.middle, farewell()"),
            "\(removed.stderr)")

        let entries = try String(contentsOf: changelog, encoding: .utf8)
        let breaking = "### Breaking\n\n- `farewell()` is removed.\n- `Side.middle` is new.\n\n"
        try entries.replacingOccurrences(of: "## [Unreleased]\n", with: "## [Unreleased]\n\n" + breaking)
            .write(to: changelog, atomically: true, encoding: .utf8)
        let named = try await CLITests.run(script, [], in: repository, environment: environment)
        #expect(named.status == 0, "\(named.stdout)\n\(named.stderr)")
        #expect(named.stdout.contains("named in CHANGELOG.md: API breakage: func farewell() has been removed"))
    }
}
