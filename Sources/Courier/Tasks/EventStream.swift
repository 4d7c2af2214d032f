import CourierCore
import CourierSerialization
import Foundation
import HTTPTypes

/// Server-Sent Events as an `AsyncSequence`: what ``HTTPSessionManager/events(_:parameters:headers:options:lastEventID:streamOptions:)``
/// and its variants return. Each iteration sends the request, and reconnects as its
/// ``EventStreamOptions`` say.
///
/// The events are parsed in the iterating task, as the loop asks for them: a loop that stops
/// reading stops the transfer (the body's backpressure), and no event waits in a buffer of
/// its own. Breaking out of the loop, or cancelling its task, closes the connection.
public struct EventStream: AsyncSequence, Sendable {
    /// An event.
    public typealias Element = ServerSentEvent

    /// Sends the request with these headers; returns the head and body of a successful response.
    let connect: @Sendable ([String: String]) async throws -> (HTTPResponse, ByteStream)
    let headers: [String: String]
    let lastEventID: String?
    let options: EventStreamOptions
    /// The stream reconnects (its method and body allow it, and its options do).
    let reconnects: Bool

    /// Starts the stream: the request is sent on the first `next()`.
    public func makeAsyncIterator() -> Iterator {
        Iterator(stream: self)
    }

    /// Iterates the events, connecting and reconnecting.
    public struct Iterator: AsyncIteratorProtocol {
        let stream: EventStream
        private var parser: ServerSentEventParser
        private var body: ByteStream.Iterator?
        private var head: HTTPResponse?
        private var ready: [ServerSentEvent] = []
        private var index = 0
        private var connections = 0
        private var deliveredOnThisConnection = false
        private var emptyInARow = 0
        private var serverRetry: Duration?
        private var finished = false

        init(stream: EventStream) {
            self.stream = stream
            parser = Self.parser(stream, lastEventID: stream.lastEventID)
        }

        private static func parser(_ stream: EventStream, lastEventID: String?) -> ServerSentEventParser {
            ServerSentEventParser(
                lastEventID: lastEventID, maximumLineLength: stream.options.maximumLineLength,
                maximumEventSize: stream.options.maximumEventSize)
        }

        /// The next event; nil when the stream has ended (a `204`, or the end of a stream that
        /// does not reconnect).
        public mutating func next() async throws -> ServerSentEvent? {
            while true {
                if index < ready.count {
                    defer { index += 1 }
                    deliveredOnThisConnection = true
                    return ready[index]
                }
                if finished { return nil }
                do {
                    if body == nil {
                        guard try await open() else { return nil }
                        continue
                    }
                    if let chunk = try await body?.next() {
                        ready = try parser.feed(chunk)
                        index = 0
                        continue
                    }
                    body = nil
                    if !stream.reconnects {
                        finished = true
                        if parser.isInsideEvent {
                            throw CourierError.connectionLost(
                                .init(response: head, message: "The event stream ended in the middle of an event"))
                        }
                        return nil
                    }
                    try await prepareToReconnect(after: nil)
                } catch let error as CourierError where !finished && stream.reconnects && Self.reconnects(after: error)
                {
                    body = nil
                    try await prepareToReconnect(after: error)
                } catch {
                    finished = true
                    body = nil
                    throw Task.isCancelled ? CancellationError() : error
                }
            }
        }

        /// Sends the request (again); false when the server said there is nothing more (`204`).
        private mutating func open() async throws -> Bool {
            var request = stream.headers
            request["Accept"] = "text/event-stream"
            request["Cache-Control"] = "no-store"
            if let id = parser.lastEventID, !id.isEmpty { request["Last-Event-ID"] = id }
            connections += 1
            deliveredOnThisConnection = false
            let (head, body) = try await stream.connect(request)
            if head.status.code == 204 {
                finished = true
                return false
            }
            let type =
                head.headerFields[.contentType]?.split(separator: ";").first?
                .trimmingCharacters(in: .whitespaces).lowercased() ?? ""
            guard type == "text/event-stream" else {
                finished = true
                throw CourierError.unacceptableContentType(
                    .init(
                        response: head, message: "An event stream needs Content-Type text/event-stream, not '\(type)'"))
            }
            self.head = head
            self.body = body.makeAsyncIterator()
            return true
        }

        /// After a connection ended or dropped: the backoff, or the end of the stream when too
        /// many connections in a row delivered nothing.
        private mutating func prepareToReconnect(after failure: CourierError?) async throws {
            serverRetry = parser.retry ?? serverRetry
            parser = Self.parser(stream, lastEventID: parser.lastEventID)
            emptyInARow = deliveredOnThisConnection ? 0 : emptyInARow + 1
            if emptyInARow > stream.options.maximumReconnectionsWithoutEvents {
                finished = true
                throw failure
                    ?? CourierError.connectionLost(
                        .init(message: "The event stream ended \(emptyInARow) times in a row without an event"))
            }
            do {
                try await Task.sleep(
                    for: stream.options.delay(afterEmptyReconnections: emptyInARow, serverRetry: serverRetry))
            } catch {
                finished = true
                throw CancellationError()
            }
        }

        /// Failures after which an event stream reconnects.
        private static func reconnects(after error: CourierError) -> Bool {
            switch error {
            case .connectionLost, .timedOut, .cannotConnect: true
            default: false
            }
        }
    }
}
