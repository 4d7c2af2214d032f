import CCourierSystem
import Foundation

/// Hands the bytes of an `AsyncSequence` to the engine with backpressure: a Swift task pulls
/// from the sequence only while fewer than `capacity` bytes wait to be sent, and the engine
/// pauses the transfer (`CURL_READFUNC_PAUSE`) while none wait. The state is guarded by `state`.
package final class StreamBodyBridge: Sendable {
    private struct State {
        var chunks: [Data] = []
        var firstOffset = 0
        var buffered = 0
        var finished = false
        var failure: CourierError?
        var started = false
        var cancelled = false
        var spaceWaiter: CheckedContinuation<Void, Never>?
        var onReadable: (@Sendable () -> Void)?
        var readerWaiting = false
        /// The most bytes ever waiting, for tests of the bound.
        var largestBuffered = 0
    }

    private let state = Locked(State())
    private let capacity: Int
    private let pump: @Sendable (StreamBodyBridge) async -> Void
    /// The number of bytes the sequence promises (sent as `Content-Length`); nil: unknown, sent
    /// with chunked transfer encoding.
    package let declaredLength: Int64?

    /// A bridge for `sequence`. With `length`, a sequence that gives more or fewer bytes fails
    /// the transfer (`serializationFailed`) instead of sending a body that disagrees with its
    /// `Content-Length`.
    package init<Bytes: AsyncSequence & Sendable>(_ sequence: Bytes, length: Int64? = nil, capacity: Int = 1 << 20)
    where Bytes.Element == Data {
        self.capacity = capacity
        self.declaredLength = length
        self.pump = { bridge in
            do {
                var total: Int64 = 0
                for try await chunk in sequence {
                    total += Int64(chunk.count)
                    if let length, total > length {
                        bridge.finish(
                            .serializationFailed(
                                .init(message: "The body stream gave more than its declared length of \(length) bytes"))
                        )
                        return
                    }
                    if await !bridge.push(chunk) { return }
                }
                if let length, total != length {
                    bridge.finish(
                        .serializationFailed(
                            .init(message: "The body stream ended after \(total) of its declared \(length) bytes")))
                    return
                }
                bridge.finish(nil)
            } catch {
                bridge.finish(.serializationFailed(.init(message: "The body stream failed: \(error)")))
            }
        }
    }

    /// The most bytes that ever waited to be sent.
    var largestBuffered: Int { state.withLock { $0.largestBuffered } }

    /// Starts pulling from the sequence (once, on the first read).
    package func startIfNeeded() {
        let start = state.withLock { state -> Bool in
            defer { state.started = true }
            return !state.started
        }
        if start { Task { await pump(self) } }
    }

    /// Adds a chunk, waiting while the buffer is full. False once the transfer is gone.
    private func push(_ chunk: Data) async -> Bool {
        guard !chunk.isEmpty else { return true }
        while true {
            let outcome = state.withLock { state -> (added: Bool, wake: (@Sendable () -> Void)?)? in
                if state.cancelled { return nil }
                guard state.buffered < capacity else { return (false, nil) }
                state.chunks.append(chunk)
                state.buffered += chunk.count
                state.largestBuffered = max(state.largestBuffered, state.buffered)
                let wake = state.readerWaiting ? state.onReadable : nil
                state.readerWaiting = false
                return (true, wake)
            }
            guard let outcome else { return false }
            if outcome.added {
                outcome.wake?()
                return true
            }
            await withCheckedContinuation { continuation in
                let resumeNow = state.withLock { state -> Bool in
                    if state.cancelled || state.buffered < capacity { return true }
                    state.spaceWaiter = continuation
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        }
    }

    private func finish(_ failure: CourierError?) {
        let wake = state.withLock { state -> (@Sendable () -> Void)? in
            state.finished = true
            state.failure = failure
            defer { state.readerWaiting = false }
            return state.readerWaiting ? state.onReadable : nil
        }
        wake?()
    }

    /// Copies waiting bytes into `buffer`. Engine thread.
    package func take(into buffer: UnsafeMutableRawBufferPointer, onReadable: (@Sendable () -> Void)?) -> BodyRead {
        let (result, waiter) = state.withLock { state -> (BodyRead, CheckedContinuation<Void, Never>?) in
            var written = 0
            while written < buffer.count, let first = state.chunks.first {
                let available = first.count - state.firstOffset
                let count = min(available, buffer.count - written)
                first.withUnsafeBytes { bytes in
                    courier_copy_bytes(buffer.baseAddress! + written, bytes.baseAddress! + state.firstOffset, count)
                }
                written += count
                state.firstOffset += count
                state.buffered -= count
                if state.firstOffset == first.count {
                    state.chunks.removeFirst()
                    state.firstOffset = 0
                }
            }
            var waiter: CheckedContinuation<Void, Never>?
            if state.buffered < capacity {
                waiter = state.spaceWaiter
                state.spaceWaiter = nil
            }
            if written > 0 { return (.bytes(written), waiter) }
            if let failure = state.failure { return (.failed(failure), waiter) }
            if state.finished { return (.bytes(0), waiter) }
            state.readerWaiting = true
            state.onReadable = onReadable
            return (.wait, waiter)
        }
        waiter?.resume()
        return result
    }

    /// The transfer is gone: stop pulling.
    package func cancel() {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            state.cancelled = true
            defer { state.spaceWaiter = nil }
            return state.spaceWaiter
        }
        waiter?.resume()
    }
}
