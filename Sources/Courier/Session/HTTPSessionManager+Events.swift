@_spi(CourierInternals) import CourierCore
import CourierPipeline
import CourierSerialization
import Foundation
import HTTPTypes

extension HTTPSessionManager {
    /// Server-Sent Events from `path` (a `GET` with `Accept: text/event-stream`), as an
    /// EventSource does: events arrive as the server sends them, and when the connection ends
    /// or drops, the request is sent again after the server's `retry:` delay (else
    /// `streamOptions.reconnectionDelay`) with `Last-Event-ID`, so the server can continue
    /// where it was.
    ///
    /// ```swift
    /// for try await event in api.events("notifications") where event.event == "mention" {
    ///     show(event.data)
    /// }
    /// ```
    ///
    /// A lost, refused or timed-out connection is reconnected the same way. Reconnections that
    /// deliver no event back off (``EventStreamOptions``: a floor under `retry:`, doubling
    /// delays with jitter, a limit after which the stream fails). The sequence ends when the
    /// server answers 204 No Content, and throws when it answers another status outside
    /// 200..<300 or a `Content-Type` other than `text/event-stream` (the EventSource rules:
    /// those are not retried), when a line or an event passes its size limit
    /// (`responseTooLarge`), or when it fails in another way. Stopping the iteration, or
    /// cancelling its task, closes the connection.
    public nonisolated func events(
        _ path: String, parameters: JSON? = nil, headers: [String: String] = [:],
        options: RequestOptions = RequestOptions(), lastEventID: String? = nil,
        streamOptions: EventStreamOptions = EventStreamOptions()
    ) -> AsyncThrowingStream<ServerSentEvent, any Error> {
        AsyncThrowingStream { continuation in
            let task = Task {
                var lastEventID = lastEventID
                var serverRetry: Duration?
                var emptyInARow = 0
                while !Task.isCancelled {
                    var request = headers
                    request["Accept"] = "text/event-stream"
                    request["Cache-Control"] = "no-store"
                    if let lastEventID, !lastEventID.isEmpty { request["Last-Event-ID"] = lastEventID }
                    var parser = ServerSentEventParser(
                        lastEventID: lastEventID, maximumLineLength: streamOptions.maximumLineLength,
                        maximumEventSize: streamOptions.maximumEventSize)
                    var delivered = false
                    var lastFailure: CourierError?
                    do {
                        let (head, body) = try await self.stream(
                            .get, path, parameters: parameters, headers: request, options: options)
                        if head.status.code == 204 { break }
                        let type =
                            head.headerFields[.contentType]?.split(separator: ";").first?
                            .trimmingCharacters(in: .whitespaces).lowercased() ?? ""
                        guard type == "text/event-stream" else {
                            throw CourierError.unacceptableContentType(
                                .init(
                                    response: head,
                                    message: "An event stream needs Content-Type text/event-stream, not '\(type)'"))
                        }
                        for try await chunk in body {
                            for event in try parser.feed(chunk) {
                                delivered = true
                                continuation.yield(event)
                            }
                        }
                    } catch let error as CourierError where Self.reconnects(after: error) {
                        lastFailure = error  // the connection dropped: reconnect below
                    } catch {
                        continuation.finish(throwing: Task.isCancelled ? CancellationError() : error)
                        return
                    }
                    lastEventID = parser.lastEventID
                    serverRetry = parser.retry ?? serverRetry
                    emptyInARow = delivered ? 0 : emptyInARow + 1
                    if emptyInARow > streamOptions.maximumReconnectionsWithoutEvents {
                        continuation.finish(
                            throwing: lastFailure
                                ?? CourierError.connectionLost(
                                    .init(
                                        message:
                                            "The event stream ended \(emptyInARow) times in a row without an event")))
                        return
                    }
                    do {
                        try await Task.sleep(
                            for: streamOptions.delay(afterEmptyReconnections: emptyInARow, serverRetry: serverRetry))
                    } catch {
                        break
                    }
                }
                continuation.finish()
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }

    /// Failures after which an event stream reconnects.
    private nonisolated static func reconnects(after error: CourierError) -> Bool {
        switch error {
        case .connectionLost, .timedOut, .cannotConnect: true
        default: false
        }
    }
}
