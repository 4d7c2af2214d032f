// Shared by every Swift benchmark client: the command-line options, the
// request loop (a task group with one child task per request, C at a time,
// until TOTAL are issued), the RESULT line, and the decoded shape of
// small.json; and the --mode option of the large-transfer rows (one transfer
// of a large file).
//
// Every client has the same shape so that only the HTTP client differs, and
// it is the shape users write: a task group, a child task per request, each:
// one GET, check status 200 and a 500-byte body (or decode it).

import ArgumentParser
import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Options every client takes: `--url URL --total N --concurrency C [--decode]`.
public struct BenchOptions: ParsableArguments, Sendable {
    /// The URL every request GETs.
    @Option(help: "The URL to GET, e.g. http://127.0.0.1:8080/small.json.")
    public var url: String

    /// Number of requests in all.
    @Option(help: "Number of requests in all.")
    public var total: Int = 20_000

    /// Requests in flight at once: child tasks running at once.
    @Option(help: "Requests in flight at once (child tasks at once, and connections per host).")
    public var concurrency: Int = 64

    /// The body length every response must have.
    @Option(help: "Expected body length in bytes; every response must have it.")
    public var expectedBytes: Int = 500

    /// Decode each body into ``Small`` instead of only checking its length.
    @Flag(help: "Decode each body into `Small` instead of only collecting the bytes.")
    public var decode: Bool = false

    /// Creates the options with their defaults (ArgumentParser fills them in).
    public init() {}

    /// Rejects a non-positive total or concurrency and a relative URL.
    public func validate() throws {
        guard total > 0 else { throw ValidationError("--total must be positive") }
        guard concurrency > 0 else { throw ValidationError("--concurrency must be positive") }
        guard URL(string: url)?.host != nil else { throw ValidationError("--url must be an absolute URL") }
    }
}

/// The HTTP version a client is told to use (`--http-version`), which every
/// response must then have: the https and h2 rows of scripts/bench.
public enum BenchHTTPVersion: String, CaseIterable, ExpressibleByArgument, Sendable {
    /// HTTP/1.1 forced, also over TLS (no ALPN h2).
    case http1_1 = "1.1"
    /// HTTP/2 over TLS, negotiated with ALPN.
    case http2 = "2"
}

/// Options of the HTTPS rows: `--ca-file PEM` and `--http-version 1.1|2`.
/// Neither given: the client behaves as in the plain-HTTP small row.
public struct TLSOptions: ParsableArguments, Sendable {
    /// A PEM file of CA certificates to trust.
    @Option(help: "A PEM file of CA certificates to trust (the bench server's self-signed certificate).")
    public var caFile: String?

    /// A PEM bundle of CA certificates to trust instead of the system's (bench-courier:
    /// `tls.certificateAuthorityBundle`; the https-new row).
    @Option(help: "A PEM bundle of CAs to trust instead of the system's (bench-courier only).")
    public var caBundle: String?

    /// The HTTP version to use and to find in every response.
    @Option(
        help: """
            HTTP version: 1.1 (forced) or 2 (over TLS, ALPN); every response must have it. \
            Default: the client's plain-HTTP setting, unchecked.
            """)
    public var httpVersion: BenchHTTPVersion?

    /// Creates the options with their defaults (ArgumentParser fills them in).
    public init() {}
}

/// Checks the HTTP version of one response, as its client reports it
/// ("1.1", "2"), when a version was asked for.
@inline(__always)
public func check(httpVersion: String, expected: BenchHTTPVersion?, request n: Int) throws {
    guard let expected, httpVersion != expected.rawValue else { return }
    throw BenchFailure("request \(n): HTTP version '\(httpVersion)', expected \(expected.rawValue)")
}

/// The workload a client runs (`--mode`): the small GETs, or one of the
/// large-transfer rows of Documentation/Benchmarks.md, each a single transfer of the large
/// fixture file (requests=1 in the RESULT line).
public enum BenchMode: String, CaseIterable, ExpressibleByArgument, Sendable {
    /// TOTAL GETs of small.json, CONCURRENCY in flight (``BenchOptions``).
    case small
    /// GET the large file into a file (`--output`).
    case downloadFile = "download-file"
    /// GET the large file as a stream of chunks, discarding them.
    case streamDiscard = "stream-discard"
    /// PUT the file `--file` as the request body.
    case uploadFile = "upload-file"
    /// POST the file `--file` as the one part (`file`) of a multipart/form-data body.
    case multipartFile = "multipart-file"
    /// GET an event stream of `--total` events (``BenchEvent``, about 200 bytes each) ending
    /// with `data: [DONE]`; decode each event's data and check its `id` (0, 1, 2...).
    case sseDecode = "sse-decode"
    /// WebSockets to the echo server at `--url`: round trips, then streamed messages
    /// (``WebSocketBenchOptions``, ``runWebSocketBench(client:options:open:roundTrips:stream:close:)``).
    case websocket
}

/// One event of the sse-decode mode's stream, shaped as a model API's streamed delta:
/// `{"id": N, "model": "bench", "choices": [{"index": 0, "delta": {"content": "..."}}]}`.
public struct BenchEvent: Codable, Sendable {
    /// One choice of the delta.
    public struct Choice: Codable, Sendable {
        /// The text of the delta.
        public struct Delta: Codable, Sendable {
            /// The text.
            public var content: String
        }
        /// The choice's index.
        public var index: Int
        /// The delta.
        public var delta: Delta
    }
    /// The event's number: 0, 1, 2... in the stream's order.
    public var id: Int
    /// The model's name.
    public var model: String
    /// The deltas.
    public var choices: [Choice]
}

/// The check every client makes of the sse-decode mode's events: each event's `id` in order,
/// one choice with text, and `expected` of them before `[DONE]`.
public struct EventChecker {
    /// Events checked so far.
    public private(set) var count = 0
    /// Creates a checker.
    public init() {}
    /// Checks the next event.
    public mutating func check(_ event: BenchEvent) throws {
        guard event.id == count, event.choices.count == 1, !event.choices[0].delta.content.isEmpty else {
            throw BenchFailure("event \(count): unexpected id \(event.id) or choices")
        }
        count += 1
    }
    /// Checks the count at the end of the stream.
    public func finish(expected: Int) throws {
        guard count == expected else { throw BenchFailure("\(count) events before [DONE], expected \(expected)") }
    }
}

/// Options of the large-transfer modes: `--mode`, and the files they use.
/// `--url` (``BenchOptions``) is the transfer's URL and `--expected-bytes`
/// the length the downloaded or streamed body must have.
public struct TransferOptions: ParsableArguments, Sendable {
    /// The workload.
    @Option(help: "Workload: \(BenchMode.allCases.map(\.rawValue).joined(separator: ", ")).")
    public var mode: BenchMode = .small

    /// Where download-file writes the body.
    @Option(help: "download-file: the file to write the body to (replaced if it exists).")
    public var output: String?

    /// The file upload-file and multipart-file send.
    @Option(help: "upload-file, multipart-file: the file to send.")
    public var file: String?

    /// Creates the options with their defaults (ArgumentParser fills them in).
    public init() {}

    /// Rejects a mode the client does not implement and a missing file option.
    public func validate(supported: [BenchMode]) throws {
        guard supported.contains(mode) else {
            let names = supported.map(\.rawValue).joined(separator: ", ")
            throw ValidationError("--mode \(mode.rawValue) is not supported by this client (supported: \(names))")
        }
        if mode == .downloadFile, output == nil { throw ValidationError("--mode download-file needs --output") }
        if mode == .uploadFile || mode == .multipartFile, file == nil {
            throw ValidationError("--mode \(mode.rawValue) needs --file")
        }
    }
}

/// The size of the file at `path` in bytes.
public func fileSize(atPath path: String) throws -> Int {
    let attributes = try FileManager.default.attributesOfItem(atPath: path)
    guard let size = attributes[.size] as? NSNumber else { throw BenchFailure("no size for \(path)") }
    return size.intValue
}

/// The decoded shape of the benchmark's small.json (exactly 500 bytes,
/// generated by scripts/bench). Decoding it is the "decoded" workload.
public struct Small: Codable, Sendable, Equatable {
    /// The nested object of small.json.
    public struct Owner: Codable, Sendable, Equatable {
        /// The owner's number.
        public var id: Int
        /// The owner's name.
        public var login: String
    }
    /// A number.
    public var id: Int
    /// A short string.
    public var name: String
    /// A Boolean.
    public var active: Bool
    /// A floating-point number.
    public var score: Double
    /// An array of strings.
    public var tags: [String]
    /// A nested object.
    public var owner: Owner
    /// A timestamp, kept as a string.
    public var created: String
    /// Filler that brings the file to exactly 500 bytes.
    public var padding: String
}

/// A benchmark failure; the process exits non-zero.
public struct BenchFailure: Error, CustomStringConvertible {
    /// What went wrong.
    public var description: String
    /// Creates a failure with a message.
    public init(_ description: String) { self.description = description }
}

/// Peak resident set size of this process in KiB (`ru_maxrss` on Linux).
public func maxRSSKilobytes() -> Int {
    var usage = rusage()
    #if canImport(Darwin)
    getrusage(RUSAGE_SELF, &usage)
    return Int(usage.ru_maxrss) / 1024  // bytes on Darwin
    #else
    getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
    return Int(usage.ru_maxrss)  // KiB on Linux
    #endif
}

/// Runs `total` calls of `request`, `concurrency` at a time, in the shape users write: a task
/// group with one child task per request. The group starts `concurrency` children, then one
/// more each time a child finishes, until `total` have run; so exactly `total` requests are
/// issued whatever their latency. The first error cancels the rest and is rethrown. Returns
/// the elapsed seconds and the requests that succeeded.
public func runRequests(
    total: Int,
    concurrency: Int,
    request: @escaping @Sendable (Int) async throws -> Void
) async throws -> (seconds: Double, requests: Int) {
    let clock = ContinuousClock()
    let start = clock.now
    var done = 0
    try await withThrowingTaskGroup(of: Void.self) { group in
        var issued = 0
        while issued < min(concurrency, total) {
            let n = issued
            group.addTask { try await request(n) }
            issued += 1
        }
        while try await group.next() != nil {
            done += 1
            if issued < total {
                let n = issued
                group.addTask { try await request(n) }
                issued += 1
            }
        }
    }
    let elapsed = start.duration(to: clock.now)
    let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    return (seconds, done)
}

/// Prints the one machine-readable line that scripts/bench parses; `bytes`
/// (the body bytes moved, for the large-transfer rows) is appended when given.
/// With `httpVersion` (every response checked to have it), ` http=1.1|2` follows;
/// then `fields` (a mode's own figures, as `key=value`).
public func printResult(
    client: String, seconds: Double, requests: Int, bytes: Int? = nil, httpVersion: BenchHTTPVersion? = nil,
    events: Int? = nil, fields: KeyValuePairs<String, String> = [:]
) {
    var line =
        "RESULT client=\(client) seconds=\(String(format: "%.4f", seconds)) requests=\(requests) maxrss_kb=\(maxRSSKilobytes())"
    if let bytes { line += " bytes=\(bytes)" }
    if let events { line += " events=\(events)" }
    if let httpVersion { line += " http=\(httpVersion.rawValue)" }
    for (key, value) in fields { line += " \(key)=\(value)" }
    FileHandle.standardOutput.write(Data((line + "\n").utf8))  // unbuffered
}

/// Checks one response the same way in every client.
@inline(__always)
public func check(status: Int, bodyCount: Int, expected: Int, request n: Int) throws {
    guard status == 200 else { throw BenchFailure("request \(n): status \(status), expected 200") }
    guard bodyCount == expected else {
        throw BenchFailure("request \(n): body of \(bodyCount) bytes, expected \(expected)")
    }
}

/// A lock-free counter shared by concurrent tasks.
public final class Counter: Sendable {
    private let storage = Atomic<Int>(0)
    /// Creates a counter at zero.
    public init() {}
    /// Returns the value before the increment.
    public func increment() -> Int { storage.add(1, ordering: .relaxed).oldValue }
    /// Adds `n`; returns the value before.
    public func add(_ n: Int) -> Int { storage.add(n, ordering: .relaxed).oldValue }
    /// The current value.
    public var value: Int { storage.load(ordering: .relaxed) }
}
