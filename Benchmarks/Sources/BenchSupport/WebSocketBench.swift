// The websocket mode (the ws-echo row of scripts/bench), shared by bench-courier and
// bench-wskit: the options, the messages and their checks, and the phases, each a task group
// with one child task per socket (the shape users write):
//
//   open     --ws-sockets WebSockets to --url (the echo server), a child task each.
//   rtt      each socket makes --ws-rounds round trips: send a text message, wait for its
//            echo, check it (and time it); the next one after that.
//   stream   each socket sends --ws-messages messages without waiting for their echoes (a
//            sender task) while its reader takes the echoes and checks each, in order.
//   close    each socket is closed (the close handshake).
//
// Every message is --ws-bytes bytes of ASCII, unique per phase, socket and round. An echo that
// differs from what was sent is counted; any fails the run after its phase. The clients
// differ only in the closures they give ``runWebSocketBench``: how a socket is opened, and
// the loops of the two timed phases, written as a user of each library writes them.

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

/// Options of the websocket mode.
public struct WebSocketBenchOptions: ParsableArguments, Sendable {
    /// WebSockets open at once, a child task each.
    @Option(help: "websocket: WebSockets open at once, a child task each.")
    public var wsSockets: Int = 64

    /// Round trips per socket in the rtt phase.
    @Option(help: "websocket: round trips per socket (send, wait for the echo) in the rtt phase.")
    public var wsRounds: Int = 1000

    /// Messages per socket in the stream phase.
    @Option(help: "websocket: messages per socket in the stream phase (sent without waiting for echoes).")
    public var wsMessages: Int = 1000

    /// The size of every message.
    @Option(help: "websocket: bytes of every text message (16 or more).")
    public var wsBytes: Int = 32

    /// Seconds without progress before the run is failed.
    @Option(help: "websocket: seconds without a message before the run fails, with each socket's progress.")
    public var wsStallSeconds: Int = 20

    /// Creates the options with their defaults (ArgumentParser fills them in).
    public init() {}

    /// Rejects non-positive counts and messages too short for their number.
    public func validate() throws {
        guard wsSockets > 0, wsRounds > 0, wsMessages > 0, wsStallSeconds > 0 else {
            throw ValidationError("--ws-sockets, --ws-rounds, --ws-messages and --ws-stall-seconds must be positive")
        }
        guard wsBytes >= 16 else { throw ValidationError("--ws-bytes must be 16 or more") }
        guard wsSockets < 100_000, wsRounds < 1_000_000_000, wsMessages < 1_000_000_000 else {
            throw ValidationError("--ws-sockets or a count is too large for the messages' numbering")
        }
    }
}

/// The text of one message: `P SSSSS-NNNNNNNNN` (phase letter, socket, round, fixed width),
/// then letters up to `bytes`.
@inline(__always)
public func webSocketMessage(phase: UInt8, socket: Int, index: Int, bytes: Int) -> String {
    String(unsafeUninitializedCapacity: bytes) { buffer in
        buffer[0] = phase
        buffer[1] = UInt8(ascii: " ")
        var value = socket
        for position in stride(from: 6, through: 2, by: -1) {
            buffer[position] = UInt8(ascii: "0") &+ UInt8(value % 10)
            value /= 10
        }
        buffer[7] = UInt8(ascii: "-")
        value = index
        for position in stride(from: 16, through: 8, by: -1) {
            buffer[position] = UInt8(ascii: "0") &+ UInt8(value % 10)
            value /= 10
        }
        var position = 17
        while position < bytes {
            buffer[position] = UInt8(ascii: "a") &+ UInt8((position &+ socket &+ index) % 26)
            position += 1
        }
        return bytes
    }
}

/// User + system CPU seconds of this process so far (every thread).
public func processCPUSeconds() -> Double {
    var usage = rusage()
    #if canImport(Darwin)
    getrusage(RUSAGE_SELF, &usage)
    #else
    getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
    #endif
    func seconds(_ time: timeval) -> Double { Double(time.tv_sec) + Double(time.tv_usec) / 1e6 }
    return seconds(usage.ru_utime) + seconds(usage.ru_stime)
}

/// What the run has done so far, for the stall report: per socket, messages sent and echoes
/// taken in the current phase.
public final class WebSocketProgress: Sendable {
    /// Messages sent, per socket.
    public let sent: [Counter]
    /// Echoes received and checked, per socket.
    public let received: [Counter]
    /// Echoes that differed from what was sent (all phases).
    public let mismatches = Counter()
    private let phase = Mutex<(name: String, expected: Int)>(("open", 1))
    private let firstMismatch = Mutex<String?>(nil)

    init(sockets: Int) {
        sent = (0..<sockets).map { _ in Counter() }
        received = (0..<sockets).map { _ in Counter() }
    }

    func start(_ name: String, expected: Int) {
        phase.withLock { $0 = (name, expected) }
        for counter in sent { _ = counter.add(-counter.value) }
        for counter in received { _ = counter.add(-counter.value) }
    }

    func mismatch(socket: Int, index: Int, sent: String, received: String) {
        _ = mismatches.increment()
        firstMismatch.withLock {
            if $0 == nil { $0 = "socket \(socket) message \(index): sent '\(sent)', echoed '\(received)'" }
        }
    }

    var mismatchDescription: String { firstMismatch.withLock { $0 } ?? "" }

    /// Everything the sockets have taken so far (changes as long as the run moves).
    var total: Int { received.reduce(0) { $0 + $1.value } + sent.reduce(0) { $0 + $1.value } }

    /// The phase and the sockets that have not finished it.
    func report() -> String {
        let (name, expected) = phase.withLock { $0 }
        let behind = received.indices.filter { received[$0].value < expected }
        let shown = behind.prefix(8).map { "socket \($0): sent \(sent[$0].value), echoed \(received[$0].value)" }
        return "phase \(name): \(behind.count) of \(received.count) sockets short of \(expected) echoes ("
            + shown.joined(separator: "; ") + (behind.count > 8 ? "; ..." : "") + ")"
    }
}

/// The rtt phase of one socket: its messages, and the check and time of each echo.
public final class WebSocketRoundTrips {
    /// The socket's number.
    public let socket: Int
    /// Round trips to make.
    public let count: Int
    private let bytes: Int
    private let progress: WebSocketProgress
    private let clock = ContinuousClock()
    private var sentAt: ContinuousClock.Instant
    private var sentText = ""
    private(set) var latencies: [Int64] = []
    private(set) var done = 0

    init(socket: Int, count: Int, bytes: Int, progress: WebSocketProgress) {
        self.socket = socket
        self.count = count
        self.bytes = bytes
        self.progress = progress
        sentAt = clock.now
        latencies.reserveCapacity(count)
    }

    /// The message of round `index`; its round trip is timed from here.
    @inline(__always)
    public func message(_ index: Int) -> String {
        sentText = webSocketMessage(phase: UInt8(ascii: "r"), socket: socket, index: index, bytes: bytes)
        _ = progress.sent[socket].increment()
        sentAt = clock.now
        return sentText
    }

    /// The echo of round `index`: timed and checked against what was sent.
    @inline(__always)
    public func echo(_ text: String, _ index: Int) {
        let elapsed = sentAt.duration(to: clock.now)
        latencies.append(elapsed.components.seconds * 1_000_000_000 + elapsed.components.attoseconds / 1_000_000_000)
        if text != sentText { progress.mismatch(socket: socket, index: index, sent: sentText, received: text) }
        done += 1
        _ = progress.received[socket].increment()
    }

    /// The error for a socket whose messages ended (or were not text) before round `index`.
    public func ended(at index: Int, _ what: String = "the messages ended") -> BenchFailure {
        BenchFailure("socket \(socket), round trip \(index): \(what)")
    }
}

/// The stream phase of one socket: the messages its sender sends and its reader checks.
public final class WebSocketStream: Sendable {
    /// The socket's number.
    public let socket: Int
    /// Messages to send (and echoes to take).
    public let count: Int
    private let bytes: Int
    private let progress: WebSocketProgress

    init(socket: Int, count: Int, bytes: Int, progress: WebSocketProgress) {
        self.socket = socket
        self.count = count
        self.bytes = bytes
        self.progress = progress
    }

    /// The message `index`, for the sender.
    @inline(__always)
    public func message(_ index: Int) -> String {
        _ = progress.sent[socket].increment()
        return webSocketMessage(phase: UInt8(ascii: "s"), socket: socket, index: index, bytes: bytes)
    }

    /// The echo `index`, for the reader: checked against the message sent.
    @inline(__always)
    public func echo(_ text: String, _ index: Int) {
        let expected = webSocketMessage(phase: UInt8(ascii: "s"), socket: socket, index: index, bytes: bytes)
        if text != expected { progress.mismatch(socket: socket, index: index, sent: expected, received: text) }
        _ = progress.received[socket].increment()
    }

    /// The error for a socket whose messages ended (or were not text) before echo `index`.
    public func ended(at index: Int, _ what: String = "the messages ended") -> BenchFailure {
        BenchFailure("socket \(socket), streamed message \(index): \(what)")
    }
}

/// Runs `body` for each of `count` sockets, a child task each; returns the seconds, the
/// results in the sockets' order, and when each socket's child finished (seconds from the
/// start, sorted). The first error cancels the rest and is rethrown.
func perSocket<Result: Sendable>(
    _ count: Int, _ body: @escaping @Sendable (Int) async throws -> Result
) async throws -> (seconds: Double, results: [Result], finished: [Double]) {
    let clock = ContinuousClock()
    let start = clock.now
    func seconds(_ elapsed: Duration) -> Double {
        Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    }
    let (results, finished) = try await withThrowingTaskGroup(of: (Int, Result, Double).self) { group in
        for index in 0..<count {
            group.addTask {
                let result = try await body(index)
                return (index, result, seconds(start.duration(to: clock.now)))
            }
        }
        var results = [Result?](repeating: nil, count: count)
        var finished: [Double] = []
        while let (index, result, done) = try await group.next() {
            results[index] = result
            finished.append(done)
        }
        return (results.map { $0! }, finished.sorted())
    }
    return (seconds(start.duration(to: clock.now)), results, finished)
}

/// The websocket mode: opens the sockets, runs the rtt and stream phases, closes them, checks
/// every echo, and prints the RESULT line. `seconds` is the two timed phases together and
/// `requests` the sockets opened (a handshake each); the phases' own figures follow:
/// `open_seconds`, `rtt_seconds round_trips rtt_p50_us rtt_p99_us rtt_cpu`, `stream_seconds
/// streamed stream_cpu` (CPU: this process's user + system seconds during the phase), each
/// phase's `_first_done` and `_median_done` (seconds from its start until the first socket,
/// and half of them, finished: how evenly the sockets are served), `close_seconds`. A phase
/// with no progress for `--ws-stall-seconds` ends the process with status 3 and which sockets
/// were behind.
public func runWebSocketBench<Socket: Sendable>(
    client: String,
    options: WebSocketBenchOptions,
    open: @escaping @Sendable (Int) async throws -> Socket,
    roundTrips: @escaping @Sendable (Socket, WebSocketRoundTrips) async throws -> Void,
    stream: @escaping @Sendable (Socket, WebSocketStream) async throws -> Void,
    close: @escaping @Sendable (Socket) async throws -> Void
) async throws {
    let count = options.wsSockets
    let rounds = options.wsRounds
    let messages = options.wsMessages
    let bytes = options.wsBytes
    let progress = WebSocketProgress(sockets: count)
    let watchdog = Task.detached { await watch(progress, stallSeconds: options.wsStallSeconds) }
    defer { watchdog.cancel() }

    let opened = try await perSocket(count) { index in
        let socket = try await open(index)
        _ = progress.received[index].increment()
        return socket
    }
    let sockets = opened.results

    progress.start("rtt", expected: rounds)
    let rttCPU = processCPUSeconds()
    let rtt = try await perSocket(count) { index in
        let plan = WebSocketRoundTrips(socket: index, count: rounds, bytes: bytes, progress: progress)
        try await roundTrips(sockets[index], plan)
        guard plan.done == rounds else {
            throw BenchFailure("socket \(index): \(plan.done) round trips, expected \(rounds)")
        }
        return plan.latencies
    }
    let rttCPUSeconds = processCPUSeconds() - rttCPU
    try checkMismatches(progress, "rtt")

    progress.start("stream", expected: messages)
    let streamCPU = processCPUSeconds()
    let streamed = try await perSocket(count) { index in
        let plan = WebSocketStream(socket: index, count: messages, bytes: bytes, progress: progress)
        try await stream(sockets[index], plan)
        let echoed = progress.received[index].value
        guard echoed == messages else {
            throw BenchFailure("socket \(index): \(echoed) streamed echoes, expected \(messages)")
        }
        return echoed
    }
    let streamCPUSeconds = processCPUSeconds() - streamCPU
    try checkMismatches(progress, "stream")

    progress.start("close", expected: 1)
    let closed = try await perSocket(count) { index in
        try await close(sockets[index])
        _ = progress.received[index].increment()
    }

    var latencies = rtt.results.flatMap { $0 }
    latencies.sort()
    func percentile(_ p: Double) -> String {
        let index = min(latencies.count - 1, Int((Double(latencies.count) * p).rounded(.up)) - 1)
        return String(format: "%.1f", Double(latencies[max(index, 0)]) / 1000)
    }
    // When the sockets finished the phase: the first, and the median (the last is the phase).
    func first(_ finished: [Double]) -> String { String(format: "%.4f", finished[0]) }
    func median(_ finished: [Double]) -> String { String(format: "%.4f", finished[finished.count / 2]) }
    let fields: KeyValuePairs<String, String> = [
        "sockets": "\(count)",
        "open_seconds": String(format: "%.4f", opened.seconds),
        "rtt_seconds": String(format: "%.4f", rtt.seconds),
        "round_trips": "\(latencies.count)",
        "rtt_p50_us": percentile(0.5),
        "rtt_p99_us": percentile(0.99),
        "rtt_cpu": String(format: "%.3f", rttCPUSeconds),
        "rtt_first_done": first(rtt.finished),
        "rtt_median_done": median(rtt.finished),
        "stream_seconds": String(format: "%.4f", streamed.seconds),
        "streamed": "\(streamed.results.reduce(0, +))",
        "stream_cpu": String(format: "%.3f", streamCPUSeconds),
        "stream_first_done": first(streamed.finished),
        "stream_median_done": median(streamed.finished),
        "close_seconds": String(format: "%.4f", closed.seconds),
    ]
    printResult(client: client, seconds: rtt.seconds + streamed.seconds, requests: count, fields: fields)
}

private func checkMismatches(_ progress: WebSocketProgress, _ phase: String) throws {
    let count = progress.mismatches.value
    guard count == 0 else {
        throw BenchFailure(
            "\(phase): \(count) echoes differed from the messages sent; the first: \(progress.mismatchDescription)")
    }
}

/// Ends the process (status 3, the progress on standard error) when nothing moved for
/// `stallSeconds`: a lost message would otherwise hang the run until scripts/bench's timeout.
private func watch(_ progress: WebSocketProgress, stallSeconds: Int) async {
    var last = -1
    var still = 0
    while !Task.isCancelled {
        try? await Task.sleep(for: .seconds(1))
        let now = progress.total
        if now != last {
            last = now
            still = 0
            continue
        }
        still += 1
        if still >= stallSeconds {
            FileHandle.standardError.write(
                Data("error: no progress for \(stallSeconds) s: \(progress.report())\n".utf8))
            exit(3)
        }
    }
}
