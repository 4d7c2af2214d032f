import Courier
@_spi(CourierInternals) import CourierCore
import Foundation
import Testing

/// The `courier` command, run as a process (it is built with the tests).
@Suite struct CLITests {
    struct Run {
        var status: Int32
        var stdout: String
        var stderr: String
    }

    static func courier(_ arguments: [String], in directory: URL? = nil) async throws -> Run {
        try await run(courierBinary, arguments, in: directory)
    }

    /// The `courier` binary of this build (`swift build --build-tests` builds it next to the
    /// test bundle, whichever the scratch path and sanitizer).
    static let courierBinary = HelperProcess.executable.deletingLastPathComponent().appendingPathComponent("courier")

    /// Runs `executable` to its end, on a thread of its own (waiting for a process on one of
    /// Swift's few pool threads would hold up every other test); `environment` is added to
    /// this process's.
    static func run(
        _ executable: URL, _ arguments: [String], in directory: URL? = nil, environment: [String: String] = [:]
    ) async throws -> Run {
        try await withCheckedThrowingContinuation { continuation in
            Thread {
                continuation.resume(
                    with: Result {
                        try runBlocking(executable, arguments, in: directory, environment: environment)
                    })
            }.start()
        }
    }

    /// `run`, blocking the calling thread.
    static func runBlocking(
        _ executable: URL, _ arguments: [String], in directory: URL? = nil, environment: [String: String] = [:]
    ) throws -> Run {
        let process = ChildProcess()
        process.executableURL = executable
        process.arguments = arguments
        if let directory { process.currentDirectoryURL = directory }
        if !environment.isEmpty {
            process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        }
        let out = Pipe()
        let err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
        let stdout = out.fileHandleForReading.readDataToEndOfFile()
        let stderr = err.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return Run(
            status: process.terminationStatus, stdout: String(decoding: stdout, as: UTF8.self),
            stderr: String(decoding: stderr, as: UTF8.self))
    }

    /// The README's first command: `scripts/demo` runs a GET, a JSON POST, a download, a resumed
    /// download and an upload against a server it starts on loopback, and checks each. It runs
    /// in a network namespace of its own (`unshare -n`: loopback and nothing else), so it
    /// cannot have reached anything beyond this machine; where no namespace can be made, as
    /// itself.
    @Test func theDemoRunsWithTheNetworkCutOff() async throws {
        let root = TestServers.repositoryRoot
        let demo = root.appendingPathComponent("scripts/demo").path
        let env = URL(fileURLWithPath: "/usr/bin/env")
        let isolated = (try? await Self.run(env, ["unshare", "-n", "true"]).status) == 0
        let arguments =
            isolated ? ["unshare", "-n", "sh", "-c", "ip link set lo up && exec \"$0\"", demo] : [demo]
        let run = try await Self.run(env, arguments, in: root, environment: ["COURIER_BIN": Self.courierBinary.path])
        #expect(run.status == 0, "\(run.stderr)")
        #expect(run.stdout.contains("the server saw one Range request: bytes=1500000-"))
        #expect(run.stdout.contains("Done: a GET, a JSON POST, a download, a resumed download and an upload"))
    }

    @Test func authSendsBasicCredentialsWithTheFirstRequest() async throws {
        let fault = try await TestServers.fault()
        let name = "cli-auth-\(UUID().uuidString.prefix(8))"
        let url = fault.appendingPathComponent("auth-required/\(name)").absoluteString
        let run = try await Self.courier(["--auth", "user:secret", url])
        #expect(run.status == 0)
        #expect(try JSON(parsing: run.stdout)["authenticated"] == true)
        // One request, already carrying the credentials (no 401 first).
        let authorizations = try await RetryTests.stats(name)["authorizations"]
        #expect(authorizations == .array([.string("Basic \(Data("user:secret".utf8).base64EncodedString())")]))
        #expect(try await Self.courier(["--auth", "nocolon", url]).status != 0)
    }

    @Test func netrcSendsTheLoginForTheHostOrTheDefault() async throws {
        let fault = try await TestServers.fault()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("cli-netrc-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        func authorizations(
            _ arguments: [String], netrc: String, environment: [String: String] = [:]
        ) async throws
            -> JSON
        {
            let file = directory.appendingPathComponent(".netrc")
            try netrc.write(to: file, atomically: true, encoding: .utf8)
            let name = "cli-netrc-\(UUID().uuidString.prefix(8))"
            let url = fault.appendingPathComponent("auth-required/\(name)").absoluteString
            let run = try await Self.run(Self.courierBinary, arguments + [url], environment: environment)
            #expect(run.status == 0, "\(run.stderr)")
            return try await RetryTests.stats(name)["authorizations"]
        }
        func basic(_ pair: String) -> JSON { .array([.string("Basic \(Data(pair.utf8).base64EncodedString())")]) }
        let file = directory.appendingPathComponent(".netrc").path
        // The host's machine entry (names match in any case; quoted tokens), not the default.
        let hosts = """
            machine other.example login nobody password nothing
            machine 127.0.0.1
              login "ada lovelace" password "se\\"cret"
            default login fallback password fallback
            """
        #expect(try await authorizations(["--netrc-file", file], netrc: hosts) == basic("ada lovelace:se\"cret"))
        // ~/.netrc by --netrc, with HOME pointing at the directory; the default entry.
        let fallback = "machine other.example login nobody password nothing\ndefault login fall password back\n"
        let viaHome = try await authorizations(["--netrc"], netrc: fallback, environment: ["HOME": directory.path])
        #expect(viaHome == basic("fall:back"))
        // --auth wins over the file.
        #expect(try await authorizations(["--netrc-file", file, "--auth", "u:p"], netrc: hosts) == basic("u:p"))
        // A malformed file is an error that names it.
        try "machine".write(toFile: file, atomically: true, encoding: .utf8)
        let broken = try await Self.courier(["--netrc-file", file, fault.absoluteString])
        #expect(broken.status != 0)
        #expect(broken.stderr.contains("'machine' without a name"))
    }

    @Test func harWritesTheExchangesRedirectsIncluded() async throws {
        let fault = try await TestServers.fault()
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("cli-\(UUID()).har")
        defer { try? FileManager.default.removeItem(at: file) }
        let url = fault.appendingPathComponent("redirect").absoluteString + "?to=/bytes%3Fn%3D16"
        let run = try await Self.courier(["--har", file.path, "--auth", "u:p", url])
        #expect(run.status == 0, "\(run.stderr)")
        let archive = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: file)) as? [String: Any])
        let entries = try #require((archive["log"] as? [String: Any])?["entries"] as? [[String: Any]])
        let statuses = entries.compactMap { ($0["response"] as? [String: Any])?["status"] as? Int }
        #expect(statuses == [302, 200])
        #expect(try !String(contentsOf: file, encoding: .utf8).contains(Data("u:p".utf8).base64EncodedString()))
    }

    @Test func bearerSendsTheToken() async throws {
        let fault = try await TestServers.fault()
        let url = fault.appendingPathComponent("bearer/cli-bearer-\(UUID().uuidString.prefix(8))").absoluteString
        let run = try await Self.courier(["--check-status", "--bearer", "fresh", url])
        #expect(run.status == 0)
        #expect(try JSON(parsing: run.stdout)["authenticated"] == true)
        #expect(try await Self.courier(["--check-status", "--bearer", "stale", url]).status == 4)
    }

    @Test func proxySendsThroughTheProxyWithItsCredentials() async throws {
        let fault = try await TestServers.fault()
        let proxy = "http://courier:proxy-secret@127.0.0.1:\(fault.port!)"
        // example.test is never resolved: the request goes to the proxy, in absolute form.
        let run = try await Self.courier(["--proxy", proxy, "http://example.test/anything"])
        #expect(run.status == 0)
        let reply = try JSON(parsing: run.stdout)
        #expect(reply["proxied"] == "http://example.test/anything")
        #expect(
            reply["proxyAuthorization"] == .string("Basic \(Data("courier:proxy-secret".utf8).base64EncodedString())"))
        #expect(try await Self.courier(["--proxy", "ftp://127.0.0.1", "http://example.test/"]).status != 0)
    }

    @Test func interfaceSendsFromALocalAddress() async throws {
        let url = try await TestServers.httpbin().appendingPathComponent("ip").absoluteString
        let run = try await Self.courier(["--interface", "127.0.0.5", url])
        #expect(run.status == 0, "\(run.stderr)")
        #expect(try JSON(parsing: run.stdout)["origin"] == "127.0.0.5")
        // Not an address, so an interface's name: this machine has none of that name.
        let missing = try await Self.courier(["--interface", "nosuch9", url])
        #expect(missing.status != 0)
        #expect(missing.stderr.contains("nosuch9"))
    }

    @Test func maxSizeRefusesALargerBodyPrintedOrDownloaded() async throws {
        let fault = try await TestServers.fault()
        let url = fault.appendingPathComponent("bytes").absoluteString
        let small = try await Self.courier(["--max-size", "1000", url + "?n=1000"])
        #expect(small.status == 0, "\(small.stderr)")
        let large = try await Self.courier(["--max-size", "1000", url + "?n=5000"])
        #expect(large.status != 0)
        #expect(large.stderr.contains("limit of 1000 bytes"), "\(large.stderr)")
        // A chunked body to a file: no length says so first, and no file is left.
        let directory = try DownloadTests.temporaryDirectory()
        let file = directory.appendingPathComponent("out.bin")
        let chunked = fault.appendingPathComponent("chunked").absoluteString + "?n=100000&chunk=1000"
        let download = try await Self.courier(["--max-size", "10000", "--download", "--output", file.path, chunked])
        #expect(download.status != 0)
        #expect(!FileManager.default.fileExists(atPath: file.path))
        #expect(try await Self.courier(["--max-size", "-1", url]).status != 0)
    }

    @Test func retryTriesAgainAfterTransientStatuses() async throws {
        let fault = try await TestServers.fault()
        func flaky(_ fails: Int) -> String {
            fault.appendingPathComponent("flaky/cli-retry-\(UUID().uuidString.prefix(8))").absoluteString
                + "?fail=\(fails)"
        }
        let retried = try await Self.courier(["--retry", "2", "--check-status", flaky(2)])
        #expect(retried.status == 0)
        #expect(try JSON(parsing: retried.stdout)["attempt"] == 3)
        // Retries spent: the last answer is printed, and judged, as any response.
        let spent = try await Self.courier(["--retry", "1", "--check-status", flaky(3)])
        #expect(spent.status == 5)
        #expect(spent.stdout == "flaky 2\n")
        #expect(try await Self.courier(["--check-status", flaky(1)]).status == 5)
    }

    @Test func offlinePrintsTheRequestAndSendsNothing() async throws {
        let fault = try await TestServers.fault()
        let name = "cli-offline-\(UUID().uuidString.prefix(8))"
        let url = fault.appendingPathComponent("flaky/\(name)").absoluteString
        let run = try await Self.courier(["--offline", "--auth", "u:p", "POST", url, "name=Ada", "X-Demo:yes"])
        #expect(run.status == 0)
        #expect(run.stdout.hasPrefix("POST /flaky/\(name) HTTP/1.1\nHost: 127.0.0.1:\(fault.port!)\n"))
        #expect(run.stdout.contains("\nX-Demo: yes\n"))
        #expect(run.stdout.contains("\nContent-Type: application/json\n"))
        #expect(run.stdout.contains("\nAuthorization: Basic dTpw\n"))
        #expect(run.stdout.contains("\"name\": \"Ada\""))
        #expect(try await RetryTests.stats(name)["requests"] == 0)
    }

    @Test func sessionKeepsCookiesAndCredentialsBetweenRuns() async throws {
        let httpbin = try await TestServers.httpbin()
        let config = FileManager.default.temporaryDirectory.appendingPathComponent("cli-session-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: config) }
        func courier(_ arguments: [String]) async throws -> Run {
            try await Self.run(Self.courierBinary, arguments, environment: ["XDG_CONFIG_HOME": config.path])
        }
        let name = "s-\(UUID().uuidString.prefix(8))"
        // A session cookie set in one run (through a redirect) goes with the next run's request.
        let set = try await courier([
            "--session", name, httpbin.appendingPathComponent("cookies/set").absoluteString + "?flavor=oat",
        ])
        #expect(set.status == 0)
        let cookies = httpbin.appendingPathComponent("cookies").absoluteString
        #expect(try JSON(parsing: await courier(["--session", name, cookies]).stdout)["cookies"] == ["flavor": "oat"])
        #expect(try JSON(parsing: await courier(["--session", "other-\(name)", cookies]).stdout)["cookies"] == [:])
        #expect(try JSON(parsing: await Self.courier([cookies]).stdout)["cookies"] == [:])
        // --auth given once is kept for the later runs of the session.
        let protected = httpbin.appendingPathComponent("basic-auth/ada/secret").absoluteString
        #expect(
            try await courier(["--session", name, "--check-status", "--auth", "ada:secret", protected]).status == 0)
        #expect(try await courier(["--session", name, "--check-status", protected]).status == 0)
        #expect(try await courier(["--session", "other-\(name)", "--check-status", protected]).status == 4)
        // One file per host and name, readable by its owner only.
        let files = try FileManager.default.subpathsOfDirectory(atPath: config.path).filter {
            URL(fileURLWithPath: $0).lastPathComponent == "\(name).json"
        }
        #expect(files.count == 1)
        let attributes = try FileManager.default.attributesOfItem(atPath: config.appendingPathComponent(files[0]).path)
        #expect((attributes[.posixPermissions] as? Int) == 0o600)
        #expect(try await courier(["--session", "../escape", cookies]).status != 0)
    }

    @Test func printChoosesThePartsOfTheExchange() async throws {
        let fault = try await TestServers.fault()
        let url = fault.appendingPathComponent("echo").absoluteString
        let heads = try await Self.courier(["-p", "Hh", "POST", url, "name=Ada"])
        #expect(heads.status == 0)
        #expect(heads.stdout.hasPrefix("POST /echo HTTP/1.1\n"))
        #expect(heads.stdout.contains("\nHTTP/1.1 200 OK\n"))
        #expect(!heads.stdout.contains("\"Ada\""))
        #expect(!heads.stdout.contains("bodyLength"))
        let bodies = try await Self.courier(["--print", "Bb", "POST", url, "name=Ada"])
        #expect(bodies.stdout.hasPrefix("{\n  \"name\": \"Ada\"\n}\n\n{\n"))
        #expect(!bodies.stdout.contains("POST /echo HTTP/1.1") && !bodies.stdout.contains("HTTP/1.1 200 OK"))
        #expect(bodies.stdout.contains("\"bodyLength\": "))
        // The default is the response body; -v everything.
        #expect(try await Self.courier([url]).stdout.hasPrefix("{\n  \"bodyLength\": 0,"))
        let verbose = try await Self.courier(["-v", url])
        #expect(verbose.stdout.hasPrefix("GET /echo HTTP/1.1\n") && verbose.stdout.contains("\nHTTP/1.1 200 OK\n"))
        #expect(try await Self.courier(["-p", "x", url]).status != 0)
    }

    @Test func jsonIsColoredOnATerminalAndPlainWhenPiped() async throws {
        let fault = try await TestServers.fault()
        let url = fault.appendingPathComponent("echo").absoluteString
        // `script` runs the command on a pseudo-terminal. NO_COLOR emptied: the test runner's
        // own environment may set it.
        let terminal = try await Self.run(
            URL(fileURLWithPath: "/usr/bin/script"), ["-qec", "\(Self.courierBinary.path) \(url)", "/dev/null"],
            environment: ["NO_COLOR": ""])
        #expect(terminal.stdout.contains("\u{1B}[34m\"method\"\u{1B}[0m: \u{1B}[32m\"GET\"\u{1B}[0m"))
        #expect(terminal.stdout.contains("\u{1B}[34m\"bodyLength\"\u{1B}[0m: \u{1B}[36m0\u{1B}[0m"))
        #expect(terminal.stdout.contains("\u{1B}[35mfalse\u{1B}[0m"))
        let noColor = try await Self.run(
            URL(fileURLWithPath: "/usr/bin/script"), ["-qec", "\(Self.courierBinary.path) \(url)", "/dev/null"],
            environment: ["NO_COLOR": "1"])
        #expect(!noColor.stdout.contains("\u{1B}["))
        let piped = try await Self.courier([url])
        #expect(!piped.stdout.contains("\u{1B}["))
        #expect(piped.stdout.contains("\"method\": \"GET\""))
    }

    /// An NDJSON body is printed a line at a time, as the server sends them: the first line is
    /// out while the server still holds the rest (until the test releases it).
    @Test func anNDJSONBodyIsPrintedAsItArrives() async throws {
        let fault = try await TestServers.fault()
        let name = "cli-ndjson-\(UUID().uuidString.prefix(8))"
        let process = ChildProcess()
        process.executableURL = Self.courierBinary
        process.arguments = [fault.appendingPathComponent("ndjson/\(name)").absoluteString]
        let out = Pipe()
        process.standardOutput = out
        process.standardError = Pipe()
        try process.run()
        var received = Data()
        while !String(decoding: received, as: UTF8.self).contains("\n") {
            let chunk = out.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            received.append(chunk)
        }
        #expect(String(decoding: received, as: UTF8.self) == "{\"n\": 1}\n")
        #expect(process.isRunning)
        #expect(try await Self.courier([fault.appendingPathComponent("release/\(name)").absoluteString]).status == 0)
        received.append(out.fileHandleForReading.readDataToEndOfFile())
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)
        #expect(String(decoding: received, as: UTF8.self) == "{\"n\": 1}\n{\"n\": 2}\n")
    }

    /// A model API's call as one writes it on the command line: a JSON POST whose answer,
    /// an event stream, is printed event by event while the server is still answering.
    @Test func aChatCompletionIsPrintedAsItStreams() async throws {
        let fault = try await TestServers.fault()
        let name = "cli-chat-\(UUID().uuidString.prefix(8))"
        let process = ChildProcess()
        process.executableURL = Self.courierBinary
        process.arguments = [
            "POST", fault.appendingPathComponent("v1/chat/completions").absoluteString + "?hold=\(name)",
            "model=m", "stream:=true", #"messages:=[{"role": "user", "content": "hello streaming world"}]"#,
        ]
        let out = Pipe()
        process.standardOutput = out
        process.standardError = Pipe()
        try process.run()
        var received = Data()
        while !String(decoding: received, as: UTF8.self).contains("\"hello \"") {
            let chunk = out.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            received.append(chunk)
        }
        #expect(String(decoding: received, as: UTF8.self).hasPrefix(": keep-alive\n\ndata: {"))
        #expect(!String(decoding: received, as: UTF8.self).contains("[DONE]"))
        #expect(process.isRunning)
        #expect(try await Self.courier([fault.appendingPathComponent("release/\(name)").absoluteString]).status == 0)
        received.append(out.fileHandleForReading.readDataToEndOfFile())
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)
        let text = String(decoding: received, as: UTF8.self)
        #expect(text.contains("\"world \"") && text.hasSuffix("data: [DONE]\n\n"))
    }

    /// An event stream is written as it arrives, events and all, until the server drops it.
    @Test func anEventStreamIsPrintedAsItIs() async throws {
        let fault = try await TestServers.fault()
        let run = try await Self.courier([
            fault.appendingPathComponent("events/cli-events-\(UUID().uuidString.prefix(8))").absoluteString
        ])
        #expect(run.stdout.hasPrefix(": hello comment\n"))
        #expect(run.stdout.contains("event: greeting\n"))
        // The server drops the connection after event 3, without the last chunk.
        #expect(run.status == 1)
        #expect(run.stderr.contains("connectionLost"))
    }

    @Test func itSendsJSONFieldsAndPrettyPrintsTheReply() async throws {
        let httpbin = try await TestServers.httpbin()
        let run = try await Self.courier([
            "POST", httpbin.appendingPathComponent("post").absoluteString, "name=Ben", "admin:=true", "X-Token:abc",
            "page==2",
        ])
        #expect(run.status == 0)
        let reply = try JSON(parsing: run.stdout)
        #expect(reply["json"] == ["name": "Ben", "admin": true])
        #expect(reply["headers"]["X-Token"] == "abc")
        #expect(reply["args"]["page"] == "2")
        #expect(run.stdout.contains("\n  \"args\": {"))
    }

    @Test func checkStatusMapsTheStatusToTheExitCode() async throws {
        let fault = try await TestServers.fault()
        #expect(try await Self.courier([fault.appendingPathComponent("status/404").absoluteString]).status == 0)
        #expect(
            try await Self.courier(["--check-status", fault.appendingPathComponent("status/404").absoluteString]).status
                == 4)
        #expect(
            try await Self.courier(["--check-status", fault.appendingPathComponent("status/503").absoluteString]).status
                == 5)
        let refused = try await Self.courier(["ftp://127.0.0.1/x"])
        #expect(refused.status == 1)
        #expect(refused.stderr.contains("unsupportedScheme"))
    }

    @Test func itUploadsFilesAsPartsAndAsTheBody() async throws {
        let fault = try await TestServers.fault()
        let file = try UploadTests.temporaryFile(Data("file body".utf8))
        let echo = fault.appendingPathComponent("echo").absoluteString
        let whole = try JSON(parsing: try await Self.courier(["PUT", echo, "@\(file.path)"]).stdout)
        #expect(whole["sha256"] == .string(SHA256.hex(Data("file body".utf8))))
        let form = try JSON(parsing: try await Self.courier(["POST", echo, "title=Hi", "doc@\(file.path)"]).stdout)
        #expect(form["headers"]["Content-Type"].stringValue?.hasPrefix("multipart/form-data") == true)
    }

    @Test func anInterruptedDownloadContinuesWhereItStopped() async throws {
        let fault = try await TestServers.fault()
        let directory = try DownloadTests.temporaryDirectory()
        let name = "cli-\(UInt32.random(in: 0...UInt32.max))"
        let url = fault.absoluteString + "file/\(name)?n=2000000&drop-after=700000"
        let first = try await Self.courier(["--download", url, "--output", "out.bin"], in: directory)
        #expect(first.status == 1)
        #expect(first.stderr.contains("resume with --continue"))
        let second = try await Self.courier(["--download", "--continue", url, "--output", "out.bin"], in: directory)
        #expect(second.status == 0, "\(second.stderr)")
        #expect(try Data(contentsOf: directory.appendingPathComponent("out.bin")) == faultBytes(2_000_000))
        #expect(try DownloadTests.contents(directory) == ["out.bin"])
        let stats: JSON = try await HTTPSessionManager(baseURL: fault, configuration: .ephemeral).GET("stats/\(name)")
        #expect(stats["ranges"] == [nil, "bytes=700000-"])
    }

    @Test func continueWithoutResumeDataFinishesTheOutputFileThatIsThere() async throws {
        let fault = try await TestServers.fault()
        let directory = try DownloadTests.temporaryDirectory()
        let name = "cli-\(UInt32.random(in: 0...UInt32.max))"
        let url = fault.absoluteString + "file/\(name)?n=300000"
        try faultBytes(300_000).prefix(120_000).write(to: directory.appendingPathComponent("out.bin"))
        let run = try await Self.courier(["--download", "--continue", url, "--output", "out.bin"], in: directory)
        #expect(run.status == 0, "\(run.stderr)")
        #expect(try Data(contentsOf: directory.appendingPathComponent("out.bin")) == faultBytes(300_000))
        #expect(try DownloadTests.contents(directory) == ["out.bin"])
        let stats: JSON = try await HTTPSessionManager(baseURL: fault, configuration: .ephemeral).GET("stats/\(name)")
        #expect(stats["ranges"] == ["bytes=120000-"])
    }
}

extension CLITests {
    @Test func tlsOptionsTrustPinPresentAndLimit() async throws {
        let servers = try await TestServers.tls()
        let ca = servers.ca1.path
        let valid = servers.url("valid").appendingPathComponent("tls").absoluteString
        // Unknown CA without --cacert; trusted with it, and with a matching pin.
        let untrusted = try await Self.courier([valid])
        #expect(untrusted.status == 1)
        #expect(untrusted.stderr.contains("not signed by a trusted certificate authority"))
        let pinned = try await Self.courier(["--cacert", ca, "--pin", servers.pin("valid"), valid])
        #expect(pinned.status == 0)
        #expect(pinned.stdout.hasPrefix("TLSv1.3"))
        let mismatch = try await Self.courier(["--cacert", ca, "--pin", servers.pin("rotated"), valid])
        #expect(mismatch.status == 1)
        #expect(mismatch.stderr.contains("matches none of the pins"))
        // A client certificate, PEM and PKCS#12.
        let mtls = servers.url("mtls").appendingPathComponent("tls").absoluteString
        let client = servers.client
        let pem = try await Self.courier(["--cacert", ca, "--cert", client.cert, "--key", client.key, mtls])
        #expect(pem.stdout.contains("SUCCESS CN=courier-client"))
        let p12 = try await Self.courier(["--cacert", ca, "--cert", client.p12, "--pass", client.p12_password, mtls])
        #expect(p12.stdout.contains("SUCCESS CN=courier-client"))
        // A minimum version the server does not speak.
        let old = servers.url("tls12").appendingPathComponent("tls").absoluteString
        let refused = try await Self.courier(["--cacert", ca, "--tls-min", "1.3", old])
        #expect(refused.status == 1)
        #expect(refused.stderr.contains("no TLS version in common"))
        #expect(try await Self.courier(["--tls-min", "1.1", old]).status == 64)  // a usage error
    }

    @Test func socketResolveAndHTTP2Options() async throws {
        let servers = try await TestServers.tls()
        let unix = try await Self.courier(["--unix-socket", servers.socket, "http://localhost/tls"])
        #expect(unix.stdout == "unix\n")
        let port = servers.port("valid")
        let resolved = try await Self.courier([
            "--cacert", servers.ca1.path, "--resolve", "api.courier.test:\(port):127.0.0.1",
            "https://api.courier.test:\(port)/hello.txt",
        ])
        #expect(resolved.stdout == "hello\n")
        let h2 = try await Self.courier([
            "--verbose", "--http2", "--cacert", servers.ca1.path, servers.url("valid").absoluteString + "hello.txt",
        ])
        #expect(h2.stdout.contains("HTTP/2 200"))
        #expect(try await Self.courier(["--resolve", "nonsense", "http://localhost/"]).status == 64)
    }

    // MARK: Hardening

    @Test(arguments: ["http://../x", "http://./x", "http://a..b/x", "http://%2E%2E/x"])
    func aSessionsFileStaysInItsFolderWhateverTheHost(url: String) async throws {
        let config = FileManager.default.temporaryDirectory.appendingPathComponent("cli-escape-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: config) }
        let run = try await Self.run(
            Self.courierBinary, ["--offline", "--session", "s", url], environment: ["XDG_CONFIG_HOME": config.path])
        #expect(run.status != 0)
        #expect(run.stderr.contains("--session needs a URL with a host name"), "\(run.stderr)")
        #expect((try? FileManager.default.subpathsOfDirectory(atPath: config.path)) ?? [] == [])
    }

    @Test func aSessionsCredentialGivenOverHTTPSIsNotSentOverHTTP() async throws {
        let servers = try await TestServers.tls()
        let fault = try await TestServers.fault()
        let config = FileManager.default.temporaryDirectory.appendingPathComponent("cli-scheme-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: config) }
        func courier(_ arguments: [String]) async throws -> Run {
            try await Self.run(Self.courierBinary, arguments, environment: ["XDG_CONFIG_HOME": config.path])
        }
        // The fault server as a proxy tells which Authorization a plain request carried.
        let proxy = ["--proxy", "http://courier:proxy-secret@127.0.0.1:\(fault.port!)"]
        let port = servers.port("valid")
        let secure = try await courier([
            "--session", "s", "--auth", "ada:secret", "--cacert", servers.ca1.path,
            "https://localhost:\(port)/hello.txt",
        ])
        #expect(secure.status == 0, "\(secure.stderr)")
        let plain = try await courier(["--session", "s"] + proxy + ["http://localhost:\(port)/x"])
        #expect(plain.status == 0, "\(plain.stderr)")
        #expect(try JSON(parsing: plain.stdout)["authorization"] == .null)
        #expect(plain.stderr.contains("not sent over http"))
        // Over https it still goes, from the session.
        let again = try await courier(["--session", "s", "-p", "H", "--offline", "https://localhost:\(port)/hello.txt"])
        #expect(again.stdout.contains("Authorization: Basic " + Data("ada:secret".utf8).base64EncodedString()))
        // A credential given over http is the user's choice for http.
        let given = try await courier(
            ["--session", "t", "--auth", "ada:plain"] + proxy + ["http://localhost:\(port)/x"])
        let basic = "Basic " + Data("ada:plain".utf8).base64EncodedString()
        #expect(try JSON(parsing: given.stdout)["authorization"] == .string(basic))
        let later = try await courier(["--session", "t"] + proxy + ["http://localhost:\(port)/x"])
        #expect(try JSON(parsing: later.stdout)["authorization"] == .string(basic))
    }

    /// Runs `courier` until it has written `bytes` to standard output (or `limit` passed), and
    /// stops it: what it wrote, and its peak resident memory in MiB (`VmHWM`, read before it is
    /// stopped).
    static func courierUntil(
        written bytes: Int, limit: Duration = .seconds(60), _ arguments: [String]
    ) async throws -> (written: Int, peakMiB: Int) {
        let process = ChildProcess()
        process.executableURL = courierBinary
        process.arguments = arguments
        let out = Pipe()
        process.standardOutput = out
        process.standardError = Pipe()
        try process.run()
        let written = Locked(0)
        let reader = Thread {
            while true {
                let chunk = out.fileHandleForReading.availableData
                if chunk.isEmpty { return }
                written.withLock { $0 += chunk.count }
            }
        }
        reader.start()
        let deadline = ContinuousClock.now + limit
        while written.withLock({ $0 }) < bytes, process.isRunning, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
        }
        let status = (try? String(contentsOfFile: "/proc/\(process.processIdentifier)/status", encoding: .utf8)) ?? ""
        let peak =
            status.split(separator: "\n").first { $0.hasPrefix("VmHWM:") }
            .flatMap { Int($0.split(separator: " ", omittingEmptySubsequences: true)[1]) } ?? 0
        process.terminate()
        process.waitUntilExit()
        return (written.withLock { $0 }, peak / 1024)
    }

    /// One at a time: each keeps a core busy while the body pours in. Not under a sanitizer
    /// (`COURIER_SANITIZER`): there the pouring starves the suite beside it, and the CLI's
    /// streaming is the library's byte stream, which the other suites run sanitized.
    @Test(
        .serialized, .disabled(if: ProcessInfo.processInfo.environment["COURIER_SANITIZER"] != nil),
        arguments: ["application/octet-stream", "text/plain", "application/json"])
    func anEndlessBodyIsPrintedAsItArrivesInBoundedMemory(type: String) async throws {
        let fault = try await TestServers.fault()
        let url = fault.absoluteString + "endless?type=\(type)"
        // Past the 16 MiB a JSON body is gathered to be indented, then written as it comes;
        // before, nothing came out and the whole body went into memory.
        let (written, peak) = try await Self.courierUntil(written: 24 << 20, [url])
        #expect(written >= 24 << 20, "\(type): \(written) bytes written")
        #expect(peak < 160, "\(type): \(peak) MiB resident at the most")
    }

    @Test func continueRefusesA206OfAnotherVersion() async throws {
        let fault = try await TestServers.fault()
        let directory = try DownloadTests.temporaryDirectory()
        let name = "cli-changed-\(UInt32.random(in: 0...UInt32.max))"
        let url = fault.absoluteString + "file/\(name)?n=300000&drop-after=100000&range-answer=changed"
        let first = try await Self.courier(["--download", url, "--output", "out.bin"], in: directory)
        #expect(first.status == 1)
        let second = try await Self.courier(["--download", "--continue", url, "--output", "out.bin"], in: directory)
        #expect(second.status == 1)
        #expect(second.stderr.contains("another version"), "\(second.stderr)")
        #expect(!FileManager.default.fileExists(atPath: directory.appendingPathComponent("out.bin").path))
        // The partial file still holds the first version's bytes, for a later try.
        let partial = try #require(try DownloadTests.contents(directory).first { $0.hasSuffix(".download") })
        #expect(try Data(contentsOf: directory.appendingPathComponent(partial)) == faultBytes(100_000))
    }

    @Test func retryRetriesAsManyTimesAsItsHelpSays() async throws {
        let fault = try await TestServers.fault()
        // Seven 503s (each with `Retry-After: 0`), then a 200: seven retries get there.
        let name = "cli-retry-\(UUID().uuidString.prefix(8))"
        let url = fault.absoluteString + "flaky/\(name)?fail=7&retry-after=0"
        let run = try await Self.courier(["--retry", "7", url])
        #expect(run.status == 0, "\(run.stderr)")
        #expect(try JSON(parsing: run.stdout)["attempt"] == 8)
        // Six are not enough: the last 503 is the answer.
        let short = "cli-retry-short-\(UUID().uuidString.prefix(8))"
        let failed = try await Self.courier([
            "--retry", "6", "--check-status", fault.absoluteString + "flaky/\(short)?fail=7&retry-after=0",
        ])
        #expect(failed.status == 5)
        #expect(try await RetryTests.stats(short)["requests"] == 7)
        // 500, 502, 503 and 504 are not the only 5xx: the help names the statuses it retries.
        let help = try await Self.courier(["--help"]).stdout.split(whereSeparator: \.isWhitespace).joined(
            separator: " ")
        #expect(help.contains("the statuses 408, 429, 500, 502, 503 and 504"))
    }
}
