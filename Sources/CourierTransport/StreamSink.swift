import CCourierSystem
@_spi(CourierInternals) import CourierCore
import Foundation
import HTTPTypes

/// The engine's end of a `ByteStream`: chunks wait here for the consumer.
///
/// The engine copies what libcurl delivers into the slabs of a `SlabPool` and hands each slab
/// over as soon as it is full, and what is left of it at the end of each turn of its loop, so
/// the consumer drains while the engine is still reading. The slabs come back to the pool once
/// the consumer lets go of their chunks.
///
/// `@unchecked Sendable`: `state` (a `Locked`) guards everything the two sides share; the
/// slabs being filled and the error body collected for a bad status are touched only on the
/// engine thread.
package final class StreamSink: ResponseSink, @unchecked Sendable {
    /// The consumer may fall this far behind before the transfer pauses. Each pause lets the
    /// socket's receive queue grow, and a 1 MiB bound paused a loopback download about 1,000
    /// times per GiB; at 2 MiB, with slabs handed over as they fill, it is under 100.
    package static let capacity = 2 << 20
    /// The transfer goes on once the consumer has caught up to this.
    package static let resumeBelow = 512 << 10

    private struct State {
        var chunks: [Data] = []
        var firstIndex = 0
        var buffered = 0
        var paused = false
        var finished = false
        var failure: (any Error)?
        var waiter: CheckedContinuation<Data?, any Error>?
        var resumeReceiving: (@Sendable () -> Void)?
        /// Waits for the head of the response (`stream(_:_:)`).
        var headWaiter: CheckedContinuation<HTTPResponse, any Error>?
        var headDelivered = false
        /// The head (or the failure) when it came before anyone waited.
        var headResult: Result<HTTPResponse, any Error>?
        /// The most ever held, for tests of the bound.
        var largestBuffered = 0
        /// The response's trailer fields, once the body has ended with some.
        var trailers: HTTPFields?
    }

    private let state = Locked(State())
    // Engine thread: the body of an unacceptable response, collected for the error.
    private var errorBody: MemorySink?
    /// Body bytes went to the consumer: the request cannot be tried again.
    private var delivered = false

    /// A sink with nothing in it yet.
    package init() {}

    /// How to restart the transfer after a pause (set once the transfer exists).
    package func setResumeReceiving(_ resume: @escaping @Sendable () -> Void) {
        state.withLock { $0.resumeReceiving = resume }
    }

    package var largestBuffered: Int { state.withLock { $0.largestBuffered } }

    /// The trailer fields that came after the body (set before the end is delivered).
    package var trailers: HTTPFields? { state.withLock { $0.trailers } }

    package func trailersArrived(_ trailers: HTTPFields) {
        state.withLock { $0.trailers = trailers }
    }

    // MARK: Engine side

    package func begin(_ head: RecordedHead, expectedLength: Int64?) -> CourierError? {
        if !(200..<300).contains(head.statusCode) {
            switch errorBodyKept {
            case .start:
                errorBody = MemorySink(limit: nil)
            case .whole(let limit):
                let sink = MemorySink(limit: limit)
                errorBody = sink
                return sink.begin(head, expectedLength: expectedLength)
            }
        } else if wantsHead, let response = head.response {
            deliverHead(.success(response))
        }
        return nil
    }

    /// Whether someone waits for the head (`stream(_:_:)`); set before the transfer starts.
    package var wantsHead = false

    /// How much of the body of a response with a status outside 200..<300 is kept for the
    /// error it becomes.
    package enum ErrorBodyKept {
        /// Its first MiB, for the error's message.
        case start
        /// All of it, up to `limit` bytes (a larger body fails with `responseTooLarge`): for
        /// callers that hand such a response on as a response (`relay`).
        case whole(limit: Int64?)
    }

    /// Set before the transfer starts.
    package var errorBodyKept = ErrorBodyKept.start

    private func deliverHead(_ result: Result<HTTPResponse, any Error>) {
        let waiter = state.withLock { state -> CheckedContinuation<HTTPResponse, any Error>? in
            guard !state.headDelivered else { return nil }
            state.headDelivered = true
            guard let waiter = state.headWaiter else {
                state.headResult = result
                return nil
            }
            state.headWaiter = nil
            return waiter
        }
        waiter?.resume(with: result)
    }

    /// The head of a successful response, once it has arrived; what failed the request
    /// otherwise. Call once.
    package func head() async throws -> HTTPResponse {
        try await withCheckedThrowingContinuation { continuation in
            let ready = state.withLock { state -> Result<HTTPResponse, any Error>? in
                if let result = state.headResult { return result }
                state.headWaiter = continuation
                return nil
            }
            if let ready { continuation.resume(with: ready) }
        }
    }

    // Engine thread. At most `capacity` bytes wait for the consumer, plus one delivery and
    // the slab being filled, so the pool keeps every slab it lends: they are as many as the
    // stream ever had in flight at once.
    private let slabs = SlabPool(spareLimit: capacity / SlabPool.size + 2)
    /// The slab being filled, where the bytes not yet handed over begin in it, and how far it
    /// is filled.
    private var slab: Slab?
    private var sliceStart = 0
    private var slabFilled = 0

    package var needsFlush: Bool { true }

    package func write(_ bytes: UnsafeRawBufferPointer) -> SinkWrite {
        if let errorBody {
            if case .whole = errorBodyKept { return errorBody.write(bytes) }
            if errorBody.count < 1 << 20 { _ = errorBody.write(bytes) }
            return .accepted
        }
        delivered = true
        // Deciding to pause and saying so is one step under the lock: were they two, the
        // consumer could empty the queue in between and start waiting without seeing the
        // pause, and neither side would go on again (a transfer paused with nothing pending to
        // hand over; seen as a hang with a 512 KiB capacity).
        let pendingCount = slabFilled - sliceStart  // written, not handed over
        let decision = state.withLock { state -> SinkWrite? in
            // The stream has ended while libcurl still delivers: the transfer was cancelled
            // (its iterator dropped) and the engine has yet to remove it. Pausing holds the
            // rest on the server until then; taking and dropping the bytes drained a whole
            // 64 MB body on loopback while the removal waited its turn (seen under TSan).
            if state.finished { return .pause }
            guard state.buffered + pendingCount < Self.capacity else {
                state.paused = true
                return .pause
            }
            return nil
        }
        if let decision { return decision }
        copyIntoSlabs(bytes)
        return .accepted
    }

    private func copyIntoSlabs(_ bytes: UnsafeRawBufferPointer) {
        guard var source = bytes.baseAddress else { return }
        var remaining = bytes.count
        while remaining > 0 {
            let slab = self.slab ?? startSlab()
            let count = min(remaining, SlabPool.size - slabFilled)
            courier_copy_bytes(slab.base + slabFilled, source, count)
            slabFilled += count
            source += count
            remaining -= count
            if slabFilled == SlabPool.size {
                handOverSlice()
                self.slab = nil
            }
        }
    }

    private func startSlab() -> Slab {
        let slab = slabs.take()
        self.slab = slab
        sliceStart = 0
        slabFilled = 0
        return slab
    }

    /// Hands over what this turn wrote into the slab being filled (full slabs went already).
    package func flush() {
        handOverSlice()
    }

    /// Hands the bytes written into the current slab since the last hand-over to the consumer
    /// as one slice: to a waiting consumer directly, else to the queue.
    private func handOverSlice() {
        guard let slab, slabFilled > sliceStart else { return }
        let chunk = slab.slice(sliceStart..<slabFilled)
        sliceStart = slabFilled
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

    package func end(_ outcome: SinkOutcome) -> Data {
        flush()
        return errorBody?.end(outcome) ?? Data()
    }

    // MARK: Between attempts

    package var takesAnotherAttempt: Bool { true }

    /// Another attempt is possible while the consumer has seen nothing: after a response with
    /// an unacceptable status (its body was kept for the error), or a failure before the body.
    package func prepareAnotherAttempt() async -> HTTPFields? {
        guard !delivered else { return nil }
        errorBody = nil
        return HTTPFields()
    }

    // MARK: Caller side

    /// The transfer (and the `process` hook) finished; `error` when it failed. A response with
    /// an unacceptable status fails here with its head and the start of its body.
    package func finish(raw: RawResponse?, error: (any Error)?) {
        var failure = error
        if failure == nil, let raw, !(200..<300).contains(raw.status.code) {
            failure = CourierError.unacceptableStatusCode(
                raw.errorContext("Unacceptable status code \(raw.status.code)"))
        }
        if wantsHead {
            if let failure {
                deliverHead(.failure(failure))
            } else if let raw {
                deliverHead(.success(raw.response))
            }
        }
        let waiter = state.withLock { state -> CheckedContinuation<Data?, any Error>? in
            state.finished = true
            state.failure = failure
            // A failure goes to the consumer at once; chunks already buffered are dropped.
            if failure != nil {
                state.chunks.removeAll()
                state.firstIndex = 0
                state.buffered = 0
            }
            guard state.firstIndex >= state.chunks.count else { return nil }
            defer { state.waiter = nil }
            return state.waiter
        }
        guard let waiter else { return }
        if let failure { waiter.resume(throwing: failure) } else { waiter.resume(returning: nil) }
    }

    /// The next chunk; nil at the end. Suspends only when nothing is queued.
    package func next() async throws -> Data? {
        if let immediate = take(orWait: nil) { return try immediate.get() }
        return try await withCheckedThrowingContinuation { continuation in
            if let immediate = take(orWait: continuation) { continuation.resume(with: immediate) }
        }
    }

    /// The next queued chunk, the end, or the failure; otherwise nil, and `continuation` (if
    /// any) waits for the engine's next hand-over. Restarts a paused transfer once the queue
    /// has drained far enough.
    private func take(orWait continuation: CheckedContinuation<Data?, any Error>?) -> Result<Data?, any Error>? {
        let (result, resume) = state.withLock { state -> (Result<Data?, any Error>?, (@Sendable () -> Void)?) in
            if state.firstIndex < state.chunks.count {
                // Taken out, not copied: a chunk left in the array would keep its slab.
                let chunk = state.chunks[state.firstIndex]
                state.chunks[state.firstIndex] = Data()
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
            guard let continuation else { return (nil, nil) }
            state.waiter = continuation
            var resume: (@Sendable () -> Void)?
            if state.paused {
                state.paused = false
                resume = state.resumeReceiving
            }
            return (nil, resume)
        }
        resume?()
        return result
    }
}
