// A child process for the tests that need one: a new process to restore a background session
// in, a process to kill with SIGKILL part way, an environment (HOME, XDG_CACHE_HOME) of the
// test's choosing. Built on the public API only. Prints one line per event on stdout; exits 1
// with a message on stderr when something goes wrong.
//
//   CourierTestHelper ephemeral HTTPBIN_URL
//   CourierTestHelper cookies-set HTTPBIN_URL          (default session, storage from XDG_CACHE_HOME)
//   CourierTestHelper cookies-echo HTTPBIN_URL
//   CourierTestHelper get URL [ignoring-environment] [proxy=URL]
//                                                        (ephemeral session; prints the body;
//                                                         trustsEnvironment false, a proxy)
//   CourierTestHelper trust URL system|instead=FILE|only-directory=DIR
//                                                        (an ephemeral session trusting the
//                                                         system's CAs, FILE instead, or DIR
//                                                         alone; prints accepted or refused)
//   CourierTestHelper openssl-at-exit URL STORAGE CA    (a GET on a default session, then
//                                                         returns from main; prints whether
//                                                         OpenSSL's state outlived the exit
//                                                         handlers: OpenSSLAtExit.swift)
//   CourierTestHelper bootstrapped-trace ECHO_URL        (InstrumentationSystem bootstrapped with
//                                                         an InMemoryTracer, then a GET of the fault
//                                                         server's /echo; prints the trace headers
//                                                         the server got and the finished spans)
//   CourierTestHelper background-download IDENTIFIER URL DESTINATION BYTES_PER_SECOND [PAUSE_AT]
//   CourierTestHelper background-upload IDENTIFIER URL FILE BYTES_PER_SECOND [PAUSE_AT]
//
// With PAUSE_AT, a transfer suspends itself once that many bytes have gone through and says
// `paused <bytes>`: the test then kills the process part way, however late it gets to it.
//   CourierTestHelper background-restore IDENTIFIER
//   CourierTestHelper background-claim IDENTIFIER
//   CourierTestHelper cache-bridge STORAGE              (answers the HTTP cache test suite's
//                                                         fetch() calls: CacheBridge.swift)
//   CourierTestHelper reachability PORT                  (in a network namespace of its own:
//                                                         ReachabilityScenario.swift)
//   CourierTestHelper service FAULT_URL NAME DEADLINE_MS (an HTTPSessionService in a
//                                                         ServiceGroup that SIGTERM shuts down:
//                                                         ServiceScenario.swift)
import Courier
import Foundation
import InMemoryTracing
import Instrumentation

/// Writes one line to stdout at once (a pipe would buffer `print`).
func say(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("CourierTestHelper: \(message)\n".utf8))
    exit(1)
}

func expect(_ condition: Bool, _ message: String) {
    if !condition { fail(message) }
}

let arguments = Array(CommandLine.arguments.dropFirst())

/// Says each progress value; with a PAUSE_AT argument (the sixth), suspends the transfer once
/// that many bytes went through and says `paused <bytes>`.
func report(_ progress: AsyncStream<TransferProgress>, suspend: () -> Void) async {
    let pauseAt = arguments.dropFirst(5).first.flatMap(Int64.init)
    for await value in progress {
        say("progress \(value.completedBytes)")
        if let pauseAt, value.completedBytes >= pauseAt {
            suspend()
            say("paused \(value.completedBytes)")
        }
    }
}
guard let command = arguments.first else { fail("no command") }

do {
    switch command {
    case "ephemeral":
        // Cookies (session and persistent), cacheable responses and credentials, in memory only.
        let api = HTTPSessionManager(baseURL: URL(string: arguments[1])!, configuration: .ephemeral)
        _ = try await api.GET("cookies/set", parameters: ["flavour": "oat"])
        _ = try await api.GET(
            "response-headers", parameters: ["Set-Cookie": "lasting=yes; Max-Age=3600"],
            serializer: DataResponseSerializer())
        let cookies: JSON = try await api.GET("cookies")
        expect(cookies["cookies"] == ["flavour": "oat", "lasting": "yes"], "cookies: \(cookies)")
        _ = try await api.request(.get, "cache/60", serializer: DataResponseSerializer())
        let cached = try await api.request(.get, "cache/60", serializer: DataResponseSerializer())
        expect(cached.source == .cache, "the second /cache/60 came from \(cached.source)")
        guard let space = ProtectionSpace(url: URL(string: arguments[1])!) else { fail("no protection space") }
        api.credentials.set(Credential(user: "ada", password: "secret"), for: space)
        let basic = try await api.request(.get, "basic-auth/ada/secret", serializer: DataResponseSerializer())
        expect(basic.status == .ok, "basic-auth: \(basic.status)")
        let digest = try await api.request(.get, "digest-auth/auth/ada/secret", serializer: DataResponseSerializer())
        expect(digest.status == .ok, "digest-auth: \(digest.status)")
        say("ok")

    case "cookies-set":
        let api = HTTPSessionManager(baseURL: URL(string: arguments[1])!, configuration: .default)
        _ = try await api.GET(
            "response-headers", parameters: ["Set-Cookie": "kept=1; Max-Age=3600; Path=/"],
            serializer: DataResponseSerializer())
        _ = try await api.GET("cookies/set", parameters: ["gone": "1"])
        say("set")

    case "openssl-at-exit":
        try await getThenReturnFromMain(
            URL(string: arguments[1])!, storage: URL(fileURLWithPath: arguments[2]),
            trusting: URL(fileURLWithPath: arguments[3]))

    case "cookies-echo":
        let api = HTTPSessionManager(baseURL: URL(string: arguments[1])!, configuration: .default)
        let echo: JSON = try await api.GET("cookies")
        say(String(decoding: try JSONEncoder().encode(echo["cookies"]), as: UTF8.self))

    case "get":
        var configuration = HTTPSessionConfiguration.ephemeral
        for option in arguments.dropFirst(2) {
            if option == "ignoring-environment" { configuration.trustsEnvironment = false }
            if option.hasPrefix("proxy=") { configuration.proxy = URL(string: String(option.dropFirst(6))) }
        }
        let api = HTTPSessionManager(configuration: configuration)
        let body = try await api.GET(arguments[1], serializer: StringResponseSerializer())
        say(body.replacingOccurrences(of: "\n", with: " "))

    case "trust":
        // trust URL system|instead=FILE|only-directory=DIR: GETs URL on an ephemeral session
        // that trusts the system's CAs, FILE instead of them, or DIR and nothing else; prints
        // `accepted` or `refused` (a TLS error).
        var configuration = HTTPSessionConfiguration.ephemeral
        let mode = arguments[2]
        if mode.hasPrefix("instead=") {
            configuration.certificateAuthorityBundle = URL(fileURLWithPath: String(mode.dropFirst(8)))
        } else if mode.hasPrefix("only-directory=") {
            configuration.tls.certificateAuthorityDirectory = URL(fileURLWithPath: String(mode.dropFirst(15)))
            configuration.tls.trustsSystemCertificates = false
        }
        let api = HTTPSessionManager(configuration: configuration)
        do {
            _ = try await api.GET(arguments[1], serializer: DataResponseSerializer())
            say("accepted")
        } catch let error as CourierError {
            guard case .tls = error else { fail("\(error)") }
            say("refused")
        }

    case "dns-lifetime":
        // dns-lifetime SECONDS URL HOSTS: GETs URL twice on connections of their own, and
        // between them rewrites HOSTS (bind-mounted over /etc/hosts by the test) so that the
        // URL's host names 127.0.0.2; prints the address each request connected to.
        var configuration = HTTPSessionConfiguration.ephemeral
        configuration.dnsCacheLifetime = .seconds(Int(arguments[1])!)
        configuration.maximumRequestsPerConnection = 1
        let api = HTTPSessionManager(configuration: configuration)
        let first = try await api.request(.get, arguments[2], serializer: DataResponseSerializer())
        let host = URL(string: arguments[2])!.host!
        try "127.0.0.2 \(host)\n".write(toFile: arguments[3], atomically: false, encoding: .utf8)
        let second = try await api.request(.get, arguments[2], serializer: DataResponseSerializer())
        say("\(first.metrics.remoteIP) \(second.metrics.remoteIP)")

    case "bootstrapped-trace":
        // As an app does at startup: the process-wide instrument, which a session without a
        // tracer of its own uses.
        let tracer = InMemoryTracer()
        InstrumentationSystem.bootstrap(tracer)
        let api = HTTPSessionManager(configuration: .ephemeral)
        let echo: JSON = try await api.GET(arguments[1])
        let headers = echo["headers"].objectValue ?? [:]
        func received(_ name: String) -> String {
            headers.first { $0.key.lowercased() == name }?.value.stringValue ?? "-"
        }
        say("server \(received(InMemoryTracer.traceIDKey)) \(received(InMemoryTracer.spanIDKey))")
        for span in tracer.finishedSpans {
            say("span \(span.operationName) \(span.traceID) \(span.spanID) \(span.parentSpanID ?? "-")")
        }

    case "background-download":
        let api = HTTPSessionManager(configuration: .background(identifier: arguments[1]))
        let task = api.downloadTask(arguments[2], to: URL(fileURLWithPath: arguments[3]))
        task.setMaximumBytesPerSecond(Int64(arguments[4])!)
        say("started \(task.identifier)")
        await report(task.downloadProgress, suspend: task.suspend)
        say("done \(try await task.value.path)")

    case "background-upload":
        let api = HTTPSessionManager(configuration: .background(identifier: arguments[1]))
        let task = api.uploadTask(
            .put, arguments[2], fromFile: URL(fileURLWithPath: arguments[3]), serializer: DataResponseSerializer())
        task.setMaximumBytesPerSecond(Int64(arguments[4])!)
        say("started \(task.identifier)")
        await report(task.uploadProgress, suspend: task.suspend)
        say("uploaded \(String(decoding: try await task.value, as: UTF8.self))")

    case "background-restore":
        // Every restored task to its end, then one event per task.
        let api = HTTPSessionManager(configuration: .background(identifier: arguments[1]))
        let events = api.events
        let tasks = try await api.restoredTasks()
        say("restored \(tasks.map(\.identifier.uuidString).joined(separator: ","))")
        for task in tasks {
            switch task {
            case .download(let download):
                say("done \(task.identifier) \(try await download.value.path)")
            case .upload(let upload):
                say("uploaded \(task.identifier) \(String(decoding: try await upload.value, as: UTF8.self))")
            }
        }
        var iterator = events.makeAsyncIterator()
        for _ in tasks {
            guard let event = await iterator.next() else { fail("the events ended early") }
            switch event.outcome {
            case .downloaded, .uploaded: say("event \(event.taskIdentifier)")
            case .failed(let error): fail("event \(event.taskIdentifier): \(error)")
            }
        }
        expect(try await api.restoredTasks().map(\.identifier) == tasks.map(\.identifier), "a second restore differs")

    case "background-claim":
        let api = HTTPSessionManager(configuration: .background(identifier: arguments[1]))
        do {
            _ = try await api.restoredTasks()
            say("claimed")
        } catch CourierError.sessionIdentifierInUse(let context) {
            say("in-use \(context.message)")
        }

    case "reachability":
        await runReachabilityScenario(port: Int(arguments[1])!)

    case "service":
        guard arguments.count == 4, let fault = URL(string: arguments[1]), let milliseconds = Int(arguments[3]) else {
            fail("usage: service FAULT_URL NAME DEADLINE_MS")
        }
        try await ServiceScenario.run(fault: fault, name: arguments[2], deadline: .milliseconds(milliseconds))

    case "cache-bridge":
        await runCacheBridge(storage: URL(fileURLWithPath: arguments[1]))

    default:
        fail("unknown command \(command)")
    }
} catch {
    fail("\(error)")
}
