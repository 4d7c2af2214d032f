@_spi(CourierInternals) import CourierCore
import CourierTransport
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
    /// A request already under way (`stream(_:_:)`): its body, iterated once.
    let started: IteratorStorage?

    init(start: @escaping @Sendable (StreamSink, TaskControl) -> Void) {
        self.start = start
        self.started = nil
    }

    init(started: IteratorStorage) {
        self.start = { _, _ in }
        self.started = started
    }

    /// Starts the request and returns an iterator over the body (for the body of
    /// `stream(_:_:)`, the request under way).
    public func makeAsyncIterator() -> Iterator {
        if let started { return Iterator(storage: started) }
        let sink = StreamSink()
        let control = TaskControl()
        start(sink, control)
        return Iterator(storage: IteratorStorage(sink: sink, control: control))
    }

    /// Iterates the body's chunks.
    public struct Iterator: AsyncIteratorProtocol {
        let storage: IteratorStorage

        /// The trailer fields that came after the body, once ``next()`` has returned nil (a
        /// chunked body's trailer section, an HTTP/2 response's trailing fields); nil before,
        /// and when none came.
        public var trailers: HTTPFields? { storage.ended.withLock { $0 } ? storage.sink.trailers : nil }

        /// The next chunk, or nil at the end of the body.
        public mutating func next() async throws -> Data? {
            let chunk = try await withTaskCancellationHandler {
                try await storage.sink.next()
            } onCancel: { [storage] in
                storage.control.cancel()
            }
            if chunk == nil { storage.ended.withLock { $0 = true } }
            return chunk
        }
    }

    /// Cancels the transfer when the iterator goes away before the end.
    final class IteratorStorage: Sendable {
        let sink: StreamSink
        let control: TaskControl
        /// The iterator has returned the end of the body.
        let ended = Locked(false)

        init(sink: StreamSink, control: TaskControl) {
            self.sink = sink
            self.control = control
        }

        deinit {
            control.cancel()
        }
    }
}
