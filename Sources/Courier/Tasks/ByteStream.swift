import Foundation
import HTTPTypes

/// A response body as an `AsyncSequence` of chunks, with backpressure: when the consumer falls
/// behind by `StreamSink.capacity` bytes, the transfer pauses (`CURL_WRITEFUNC_PAUSE`) until
/// it catches up, so memory stays bounded however large the body.
///
/// ```swift
/// for try await chunk in api.bytes(.get, "events") { parser.feed(chunk) }
/// ```
///
/// Each iteration sends the request anew. A status outside 200..<300 throws
/// `unacceptableStatusCode` (with the start of the body) before any chunk. Breaking out of the
/// loop, or cancelling the iterating task, cancels the transfer.
public struct ByteStream: AsyncSequence, Sendable {
    /// A chunk of the body, as libcurl delivered it (content-decoded).
    public typealias Element = Data

    let start: @Sendable (StreamSink, TaskControl) -> Void

    /// Starts the request and returns an iterator over the body.
    public func makeAsyncIterator() -> Iterator {
        let sink = StreamSink()
        let control = TaskControl()
        start(sink, control)
        return Iterator(storage: IteratorStorage(sink: sink, control: control))
    }

    /// Iterates the body's chunks.
    public struct Iterator: AsyncIteratorProtocol {
        let storage: IteratorStorage

        /// The next chunk, or nil at the end of the body.
        public mutating func next() async throws -> Data? {
            try await withTaskCancellationHandler {
                try await storage.sink.next()
            } onCancel: { [storage] in
                storage.control.cancel()
            }
        }
    }

    /// Cancels the transfer when the iterator goes away before the end.
    final class IteratorStorage: Sendable {
        let sink: StreamSink
        let control: TaskControl

        init(sink: StreamSink, control: TaskControl) {
            self.sink = sink
            self.control = control
        }

        deinit {
            control.cancel()
        }
    }
}

/// The driver's end of a `ByteStream`: chunks wait here for the consumer.
///
/// `@unchecked Sendable`: `state` (a `Locked`) guards everything the two sides share; the
/// error body collected for a bad status is touched only on the driver thread.
final class StreamSink: ResponseSink, @unchecked Sendable {
    /// The consumer may fall this far behind before the transfer pauses.
    static let capacity = 1 << 20
    /// The transfer goes on once the consumer has caught up to this.
    static let resumeBelow = 256 << 10

    private struct State {
        var chunks: [Data] = []
        var firstIndex = 0
        var buffered = 0
        var paused = false
        var finished = false
        var failure: (any Error)?
        var waiter: CheckedContinuation<Data?, any Error>?
        var resumeReceiving: (@Sendable () -> Void)?
        /// The most ever held, for tests of the bound.
        var largestBuffered = 0
    }

    private let state = Locked(State())
    // Driver thread: the body of an unacceptable response, collected for the error.
    private var errorBody: MemorySink?

    /// How to restart the transfer after a pause (set once the transfer exists).
    func setResumeReceiving(_ resume: @escaping @Sendable () -> Void) {
        state.withLock { $0.resumeReceiving = resume }
    }

    var largestBuffered: Int { state.withLock { $0.largestBuffered } }

    // MARK: Driver side

    func begin(_ head: ResponseHeadParser, expectedLength: Int64?) -> CourierError? {
        if !(200..<300).contains(head.statusCode) {
            errorBody = MemorySink(limit: nil)
        }
        return nil
    }

    /// Bytes written this turn of the driver's loop, handed over in one piece by `flush`.
    private var pending = BodyBuffer()

    var needsFlush: Bool { true }

    func write(_ bytes: UnsafeRawBufferPointer) -> SinkWrite {
        if let errorBody {
            if errorBody.collected.count < 1 << 20 { _ = errorBody.write(bytes) }
            return .accepted
        }
        // Deciding to pause and saying so is one step under the lock: were they two, the
        // consumer could empty the queue in between and start waiting without seeing the
        // pause, and neither side would go on again (a transfer paused with nothing pending to
        // hand over; seen as a hang with a 512 KiB capacity).
        let pendingCount = pending.count
        let decision = state.withLock { state -> SinkWrite? in
            if state.finished { return .accepted }  // the consumer is gone; drop the bytes
            guard state.buffered + pendingCount < Self.capacity else {
                state.paused = true
                return .pause
            }
            return nil
        }
        if let decision { return decision }
        pending.append(bytes)
        return .accepted
    }

    /// Hands the bytes of this turn to the consumer: to a waiting one directly, else to the queue.
    func flush() {
        guard !pending.isEmpty else { return }
        let chunk = pending.takeData()
        let waiter = state.withLock { state -> CheckedContinuation<Data?, any Error>? in
            if state.finished { return nil }
            if let waiter = state.waiter {
                state.waiter = nil
                return waiter
            }
            state.chunks.append(chunk)
            state.buffered += chunk.count
            state.largestBuffered = max(state.largestBuffered, state.buffered)
            return nil
        }
        waiter?.resume(returning: chunk)
    }

    func end(_ outcome: SinkOutcome) -> Data {
        flush()
        return errorBody?.end(outcome) ?? Data()
    }

    // MARK: Caller side

    /// The transfer (and the `process` hook) finished; `error` when it failed. A response with
    /// an unacceptable status fails here with its head and the start of its body.
    func finish(raw: RawResponse?, error: (any Error)?) {
        var failure = error
        if failure == nil, let raw, !(200..<300).contains(raw.status.code) {
            failure = CourierError.unacceptableStatusCode(
                raw.errorContext("Unacceptable status code \(raw.status.code)"))
        }
        let waiter = state.withLock { state -> CheckedContinuation<Data?, any Error>? in
            state.finished = true
            state.failure = failure
            // A failure goes to the consumer at once; chunks already buffered are dropped.
            if failure != nil {
                state.chunks.removeAll()
                state.buffered = 0
            }
            guard state.firstIndex >= state.chunks.count else { return nil }
            defer { state.waiter = nil }
            return state.waiter
        }
        guard let waiter else { return }
        if let failure { waiter.resume(throwing: failure) } else { waiter.resume(returning: nil) }
    }

    /// The next chunk; nil at the end.
    func next() async throws -> Data? {
        try await withCheckedThrowingContinuation { continuation in
            let (immediate, resume) = state.withLock { state -> (Result<Data?, any Error>?, (@Sendable () -> Void)?) in
                if state.firstIndex < state.chunks.count {
                    let chunk = state.chunks[state.firstIndex]
                    state.firstIndex += 1
                    state.buffered -= chunk.count
                    if state.firstIndex > 32, state.firstIndex * 2 > state.chunks.count {
                        state.chunks.removeFirst(state.firstIndex)
                        state.firstIndex = 0
                    }
                    var resume: (@Sendable () -> Void)?
                    if state.paused, state.buffered <= Self.resumeBelow {
                        state.paused = false
                        resume = state.resumeReceiving
                    }
                    return (.success(chunk), resume)
                }
                if state.finished {
                    if let failure = state.failure {
                        state.failure = nil
                        return (.failure(failure), nil)
                    }
                    return (.success(nil), nil)
                }
                state.waiter = continuation
                var resume: (@Sendable () -> Void)?
                if state.paused {
                    state.paused = false
                    resume = state.resumeReceiving
                }
                return (nil, resume)
            }
            resume?()
            if let immediate { continuation.resume(with: immediate) }
        }
    }
}
