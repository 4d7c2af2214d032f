// Courier, in one of six modes (--mode):
//
//   small           one HTTPSessionManager allowing C connections per host;
//                   --total GETs of small.json through the manager, a child
//                   task each, C at a time, as `Data` through
//                   DataResponseSerializer (checking the length), or with
//                   --decode as `Small` through the manager's JSON decoding.
//   download-file   downloadTask of --url into --output (replaced if it
//                   exists); the file's size must be --expected-bytes.
//   stream-discard  bytes(.get, ...) of --url, each chunk discarded; the
//                   chunks must add up to --expected-bytes.
//   upload-file     uploadTask(.put, ...) of --file to --url.
//   multipart-file  POST of --file as the one part `file` of a
//                   multipart/form-data body to --url.
//   sse-decode      events(.get, ...) of --url (no reconnection) decoded
//                   with decoding(BenchEvent.self, until: "[DONE]"): --total
//                   events, each checked.
//   websocket       --ws-sockets WebSockets to the echo server at --url
//                   (api.webSocket(path) on one manager, a child task each),
//                   then BenchSupport's phases (runWebSocketBench): round
//                   trips (send, then the next of socket.messages), then
//                   streamed messages (a sender task; the socket's task reads
//                   the echoes), every echo checked; then close().
//
// Over https (the https and h2 rows) and wss (websocket), --ca-file is trusted beside the system's
// CAs (configuration.tls.certificateAuthorityFile); --ca-bundle (the https-new
// row) instead of them (configuration.certificateAuthorityBundle) and --http-version picks
// the version: 1.1 sets configuration.httpVersion = .http1_1, 2 keeps the
// default (.http2OverTLS) and the default maximumConnectionsPerHost (6), 3 sets
// .http3 (HTTP/3 only: the loaded libcurl must have it, CourierInfo.supportsHTTP3)
// and keeps that default too; with it, each response's metrics.httpVersion must be
// that version (small and download-file modes: the h3 and download-h3 rows).
//
// The manager's base URL is --url without its last path component(s), and the
// request path is the rest, so the call reads as an API client would write it:
// api.GET("small.json", ...), api.downloadTask("big.bin", ...),
// api.uploadTask(.put, "upload/big.bin", ...). The large-transfer modes use an
// ephemeral session and one transfer (requests=1 in the RESULT line).

import ArgumentParser
import BenchSupport
import Courier
import Foundation

@main
struct BenchCourier: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bench-courier",
        abstract: "GET a small file TOTAL times with Courier, CONCURRENCY at a time, or move one large file."
    )

    @OptionGroup var options: BenchOptions
    @OptionGroup var transfer: TransferOptions
    @OptionGroup var tls: CourierTLSOptions
    @OptionGroup var webSocket: WebSocketBenchOptions

    @Option(help: "Session configuration of the small mode: default or ephemeral.")
    var session: String = "default"

    @Flag(help: "Small mode: add an event monitor that sleeps 10 ms per event.")
    var slowMonitor = false

    @Flag(help: "Small mode: add an event monitor that returns at once.")
    var fastMonitor = false

    @Option(
        help: "Small and websocket modes: the session's engineCount (0: the default, one per processor, at most 8).")
    var engines = 0

    @Flag(
        help: """
            Small mode without HTTP: each child task parks a continuation with a thread that resumes \
            it, as Courier's engine does; the floor of this shape (client "floor").
            """)
    var floor = false

    func validate() throws {
        guard ["default", "ephemeral"].contains(session) else {
            throw ValidationError("--session must be default or ephemeral")
        }
        try transfer.validate(supported: BenchMode.allCases)
        if tls.httpVersion != nil || tls.caFile != nil || tls.caBundle != nil {
            let allowed =
                transfer.mode == .small || (transfer.mode == .downloadFile && tls.caBundle == nil)
                || (transfer.mode == .websocket && tls.httpVersion == nil)
            guard allowed else {
                throw ValidationError(
                    "--ca-file and --http-version are for --mode small and download-file (--ca-file: websocket too)")
            }
        }
        if tls.httpVersion == .http3, !CourierInfo.supportsHTTP3 {
            throw ValidationError(
                "--http-version 3: the loaded libcurl has no HTTP/3 (\(CourierInfo.libcurlVersion)); run with"
                    + " LD_LIBRARY_PATH=<an HTTP/3 libcurl's lib>")
        }
        if tls.httpVersion != nil, options.decode {
            throw ValidationError("--http-version checks each response's version: not with --decode")
        }
    }

    func run() async throws {
        switch transfer.mode {
        case .small: try await small()
        case .downloadFile, .streamDiscard, .uploadFile, .multipartFile: try await large()
        case .sseDecode: try await sseDecode()
        case .websocket: try await webSockets()
        }
    }

    func small() async throws {
        if floor { return try await floorRun() }
        let options = self.options
        guard let url = URL(string: options.url) else { throw BenchFailure("bad URL \(options.url)") }
        let path = url.lastPathComponent
        let baseURL = url.deletingLastPathComponent()
        let api = await makeManager(
            baseURL: baseURL, ephemeral: session == "ephemeral", concurrency: options.concurrency,
            monitors: slowMonitor ? [SleepingMonitor()] : fastMonitor ? [QuickMonitor()] : [],
            caFile: tls.caFile, caBundle: tls.caBundle, httpVersion: tls.httpVersion, engines: engines)
        let expected = options.expectedBytes
        let httpVersion = tls.httpVersion
        // One closure per mode, chosen before the run: each child task makes the one call a user
        // would write, and its frame holds that call alone.
        let request: @Sendable (Int) async throws -> Void
        if let httpVersion {
            request = { n in
                // The whole response, for its metrics: GET(_:serializer:) is this call's `.value`.
                let response = try await api.request(.get, path, serializer: DataResponseSerializer())
                try check(
                    status: Int(response.status.code), bodyCount: response.data.count, expected: expected, request: n)
                try check(httpVersion: response.metrics.httpVersion, expected: httpVersion, request: n)
            }
        } else if options.decode {
            request = { n in
                let value: Small = try await api.GET(path, as: Small.self)
                guard value.id > 0 else { throw BenchFailure("request \(n): unexpected body") }
            }
        } else {
            request = { n in
                // The serializer's default acceptable status codes are 200..<300;
                // the length check is the same as the other clients'.
                let data: Data = try await api.GET(path, serializer: DataResponseSerializer())
                try check(status: 200, bodyCount: data.count, expected: expected, request: n)
            }
        }
        let result = try await runRequests(total: options.total, concurrency: options.concurrency, request: request)
        var client =
            slowMonitor
            ? "courier-slow-monitor" : fastMonitor ? "courier-monitor" : options.decode ? "courier-decode" : "courier"
        if engines > 0 { client += "-\(engines)e" }
        printResult(client: client, seconds: result.seconds, requests: result.requests, httpVersion: httpVersion)
    }

    /// One transfer of the large file; the base URL is the server's root.
    func large() async throws {
        let options = self.options
        let mode = transfer.mode
        guard let url = URL(string: options.url), let host = url.host, let port = url.port else {
            throw BenchFailure("bad URL \(options.url): scheme://host:port/path expected")
        }
        guard let baseURL = URL(string: "\(url.scheme ?? "http")://\(host):\(port)/") else {
            throw BenchFailure("bad URL \(options.url)")
        }
        let path = String(url.path.drop(while: { $0 == "/" }))
        let expected = options.expectedBytes
        let output = URL(fileURLWithPath: transfer.output ?? "/dev/shm/courier-bench.bin")
        let input = URL(fileURLWithPath: transfer.file ?? "")
        let inputSize = mode == .uploadFile || mode == .multipartFile ? try fileSize(atPath: input.path) : 0
        let bytes = Counter()

        var configuration: HTTPSessionConfiguration = .ephemeral
        // download-file over https (the download-h3 row): the bench certificate trusted, and
        // the version asked for and checked (metrics.httpVersion) as in the small mode.
        if let caFile = tls.caFile { configuration.tls.certificateAuthorityFile = URL(fileURLWithPath: caFile) }
        let httpVersion = tls.httpVersion
        if let httpVersion { configuration.httpVersion = httpVersion.preference }
        let api = HTTPSessionManager(baseURL: baseURL, configuration: configuration)
        let result = try await runRequests(total: 1, concurrency: 1) { n in
            switch mode {
            case .downloadFile:
                let task = api.downloadTask(path, to: output, options: [.replaceExisting])
                let file: URL
                if let httpVersion {
                    let response = try await task.response
                    try check(httpVersion: response.metrics.httpVersion, expected: httpVersion, request: n)
                    file = response.fileURL
                } else {
                    file = try await task.value
                }
                let size = try fileSize(atPath: file.path)
                try check(status: 200, bodyCount: size, expected: expected, request: n)
                _ = bytes.add(size)
            case .streamDiscard:
                var total = 0
                for try await chunk in api.bytes(.get, path) {
                    total += chunk.count
                }
                try check(status: 200, bodyCount: total, expected: expected, request: n)
                _ = bytes.add(total)
            case .uploadFile:
                // Status 2xx is checked by the serializer; scripts/bench checks
                // in nginx's log that the whole body arrived.
                _ = try await api.uploadTask(.put, path, fromFile: input, serializer: DataResponseSerializer()).value
                _ = bytes.add(inputSize)
            case .multipartFile:
                _ = try await api.POST(path, serializer: DataResponseSerializer()) { form in
                    try form.append(fileAt: input, name: "file")
                }
                _ = bytes.add(inputSize)
            case .small, .sseDecode, .websocket:
                throw BenchFailure("unreachable: \(mode.rawValue) is not a large transfer")
            }
        }
        printResult(
            client: "courier", seconds: result.seconds, requests: result.requests, bytes: bytes.value,
            httpVersion: httpVersion)
    }
}

extension BenchCourier {
    /// One event stream, as a model API's answer is read: `events` (sent once) decoded into
    /// `BenchEvent` until `[DONE]`, every event checked.
    func sseDecode() async throws {
        guard let url = URL(string: options.url) else { throw BenchFailure("bad URL \(options.url)") }
        let api = HTTPSessionManager(baseURL: url.deletingLastPathComponent(), configuration: .ephemeral)
        let path = url.lastPathComponent
        let expected = options.total
        let counted = Counter()
        let result = try await runRequests(total: 1, concurrency: 1) { _ in
            var checker = EventChecker()
            let events = api.events(.get, path, streamOptions: EventStreamOptions(reconnection: .never))
            for try await event in events.decoding(BenchEvent.self, until: "[DONE]") {
                try checker.check(event)
            }
            try checker.finish(expected: expected)
            _ = counted.add(checker.count)
        }
        printResult(client: "courier", seconds: result.seconds, requests: result.requests, events: counted.value)
    }
}

extension BenchCourier {
    /// The ws-echo row: WebSockets to the echo server, as an app opens them from its API
    /// client: one manager for the server (base URL the server's root, the bench CA trusted
    /// with --ca-file, default settings otherwise; --engines sets engineCount),
    /// `api.webSocket(path)` per socket.
    func webSockets() async throws {
        guard let url = URL(string: options.url), let scheme = url.scheme, let host = url.host, let port = url.port
        else { throw BenchFailure("bad URL \(options.url): wss://host:port/path expected") }
        // webSocket(_:) takes the path under an http(s) base URL (wss is https's).
        let httpScheme = scheme == "wss" ? "https" : scheme == "ws" ? "http" : scheme
        guard let baseURL = URL(string: "\(httpScheme)://\(host):\(port)/") else {
            throw BenchFailure("bad URL \(options.url)")
        }
        let path = String(url.path.drop(while: { $0 == "/" }))
        var configuration: HTTPSessionConfiguration = session == "ephemeral" ? .ephemeral : .default
        if engines > 0 { configuration.engineCount = engines }
        if let caFile = tls.caFile { configuration.tls.certificateAuthorityFile = URL(fileURLWithPath: caFile) }
        let api = HTTPSessionManager(baseURL: baseURL, configuration: configuration)
        try await runWebSocketBench(
            client: engines > 0 ? "courier-\(engines)e" : "courier", options: webSocket,
            open: { _ in try await api.webSocket(path) },
            roundTrips: { socket, plan in
                var messages = socket.messages.makeAsyncIterator()
                for round in 0..<plan.count {
                    try await socket.send(.text(plan.message(round)))
                    guard let echo = try await messages.next() else { throw plan.ended(at: round) }
                    guard case .text(let text) = echo else { throw plan.ended(at: round, "a binary message arrived") }
                    plan.echo(text, round)
                }
            },
            stream: { socket, plan in
                try await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask {
                        for index in 0..<plan.count {
                            try await socket.send(.text(plan.message(index)))
                        }
                    }
                    var messages = socket.messages.makeAsyncIterator()
                    for index in 0..<plan.count {
                        guard let echo = try await messages.next() else { throw plan.ended(at: index) }
                        guard case .text(let text) = echo else {
                            throw plan.ended(at: index, "a binary message arrived")
                        }
                        plan.echo(text, index)
                    }
                    try await group.waitForAll()
                }
            },
            close: { socket in
                await socket.close()
                guard socket.closeCode == .normalClosure else {
                    let code = socket.closeCode.map(\.description) ?? "no close frame"
                    throw BenchFailure("closed with \(code), expected 1000")
                }
            }
        )
    }
}

@HTTPSessionActor
func makeManager(
    baseURL: URL, ephemeral: Bool, concurrency: Int, monitors: [any EventMonitor] = [],
    caFile: String? = nil, caBundle: String? = nil, httpVersion: CourierHTTPVersion? = nil, engines: Int = 0
) -> HTTPSessionManager {
    var configuration: HTTPSessionConfiguration = ephemeral ? .ephemeral : .default
    if engines > 0 { configuration.engineCount = engines }
    // HTTP/2 and HTTP/3 keep the default connection limit (the rows measure default
    // settings); HTTP/1.1 needs one connection per request in flight.
    if httpVersion != .http2, httpVersion != .http3 { configuration.maximumConnectionsPerHost = concurrency }
    configuration.eventMonitors = monitors
    if let caFile { configuration.tls.certificateAuthorityFile = URL(fileURLWithPath: caFile) }
    if let caBundle { configuration.certificateAuthorityBundle = URL(fileURLWithPath: caBundle) }
    if let httpVersion { configuration.httpVersion = httpVersion.preference }
    return HTTPSessionManager(baseURL: baseURL, configuration: configuration)
}

/// A monitor that returns at once: what watching costs.
struct QuickMonitor: EventMonitor {
    func handle(_ event: RequestEvent) async {}
}

/// A monitor that takes 10 ms over every event: the requests must not wait for it.
struct SleepingMonitor: EventMonitor {
    func handle(_ event: RequestEvent) async {
        try? await Task.sleep(for: .milliseconds(10))
    }
}

extension BenchCourier {
    /// The shape of the small mode with the HTTP taken out: a task group, a child task per
    /// request, each waiting on a continuation that another thread resumes, the way a request
    /// waits on Courier's engine. What is left is what any Swift client of this shape pays:
    /// the task, its start, the continuation, the wakeup and the resume.
    func floorRun() async throws {
        let engine = FloorEngine()
        let result = try await runRequests(total: options.total, concurrency: options.concurrency) { _ in
            await withCheckedContinuation { engine.submit($0) }
        }
        printResult(client: "floor", seconds: result.seconds, requests: result.requests)
    }
}

/// A thread that resumes the continuations handed to it, in batches, as an engine thread
/// resumes the requests whose transfers ended in one turn of its loop. `@unchecked Sendable`:
/// `inbox` is guarded by `condition`.
final class FloorEngine: @unchecked Sendable {
    private let condition = NSCondition()
    private var inbox: [CheckedContinuation<Void, Never>] = []

    init() {
        let thread = Thread { [self] in loop() }
        thread.name = "floor-engine"
        thread.start()
    }

    /// Hands `continuation` to the thread, waking it when its inbox was empty.
    func submit(_ continuation: CheckedContinuation<Void, Never>) {
        condition.lock()
        inbox.append(continuation)
        let wake = inbox.count == 1
        condition.unlock()
        if wake { condition.signal() }
    }

    private func loop() {
        var batch: [CheckedContinuation<Void, Never>] = []
        while true {
            condition.lock()
            while inbox.isEmpty { condition.wait() }
            swap(&batch, &inbox)
            condition.unlock()
            for continuation in batch { continuation.resume() }
            batch.removeAll(keepingCapacity: true)
        }
    }
}

/// bench-courier's `--http-version`: BenchSupport's versions (1.1, 2) and HTTP/3, which only
/// this client is asked for (the h3 and download-h3 rows of scripts/bench).
enum CourierHTTPVersion: String, CaseIterable, ExpressibleByArgument, Sendable {
    /// HTTP/1.1 forced, also over TLS (no ALPN h2).
    case http1_1 = "1.1"
    /// HTTP/2 over TLS, negotiated with ALPN (Courier's default).
    case http2 = "2"
    /// HTTP/3 only (`.http3`): QUIC, no fallback to TCP.
    case http3 = "3"

    /// The configuration's `httpVersion` for it.
    var preference: HTTPVersionPreference {
        switch self {
        case .http1_1: .http1_1
        case .http2: .http2OverTLS  // the default
        case .http3: .http3
        }
    }
}

/// BenchSupport's `TLSOptions` with `--http-version 3` too.
struct CourierTLSOptions: ParsableArguments, Sendable {
    @Option(help: "A PEM file of CA certificates to trust (the bench server's self-signed certificate).")
    var caFile: String?

    @Option(help: "A PEM bundle of CAs to trust instead of the system's (tls.certificateAuthorityBundle).")
    var caBundle: String?

    @Option(
        help: """
            HTTP version: 1.1 (forced), 2 (over TLS, ALPN) or 3 (HTTP/3 only; needs a libcurl with it); \
            every response must have it. Default: the plain-HTTP setting, unchecked.
            """)
    var httpVersion: CourierHTTPVersion?
}

/// Checks the HTTP version of one response ("1.1", "2", "3"), when a version was asked for.
@inline(__always)
func check(httpVersion: String, expected: CourierHTTPVersion?, request n: Int) throws {
    guard let expected, httpVersion != expected.rawValue else { return }
    throw BenchFailure("request \(n): HTTP version '\(httpVersion)', expected \(expected.rawValue)")
}

/// The RESULT line, with ` http=1.1|2|3` when every response was checked to have that version.
func printResult(
    client: String, seconds: Double, requests: Int, bytes: Int? = nil, httpVersion: CourierHTTPVersion?
) {
    guard let httpVersion else {
        return printResult(client: client, seconds: seconds, requests: requests, bytes: bytes)
    }
    printResult(
        client: client, seconds: seconds, requests: requests, bytes: bytes, fields: ["http": httpVersion.rawValue])
}
