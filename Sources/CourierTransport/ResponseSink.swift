import CourierCore
import Foundation
import HTTPTypes

/// Where a transfer's response body goes. Used by one thread at a time: the engine's thread, or
/// the task that runs a stub transfer.
///
/// The engine calls `begin` once the final head has arrived (not an interim 1xx head, not a
/// redirect whose body is discarded), `write` for each chunk libcurl delivers (already
/// content-decoded), and `end` once, when the transfer is over for whatever reason.
package protocol ResponseSink: AnyObject {
    /// The final response head. Returning an error aborts the transfer with it.
    func begin(_ head: RecordedHead, expectedLength: Int64?) -> CourierError?
    func write(_ bytes: UnsafeRawBufferPointer) -> SinkWrite
    /// The transport delivered the whole body as the connection framed it, before `end`:
    /// an error when the sink knows better that the body is not whole (a resumed download's
    /// 206 that stopped before its `Content-Range` ended). The transfer then fails with it
    /// and the sink ends `.failed`.
    func checkComplete() -> CourierError?
    /// The transfer is over: `.completed` (libcurl finished it), `.failed` or `.cancelled`.
    /// Returns the bytes collected in memory, if the sink keeps any.
    func end(_ outcome: SinkOutcome) -> Data
    /// Whether the sink holds written bytes back until `flush()`, which the engine calls once
    /// per turn of its loop: libcurl may call the write callback many times in one turn, and
    /// handing each chunk to another thread on its own would cost a wakeup apiece.
    var needsFlush: Bool { get }
    func flush()
    /// Bytes of the body the destination held before this response (a resumed download's
    /// partial file, after a 206): download progress counts from there, and the total includes
    /// them. Read after `begin`.
    var progressOffset: Int64 { get }

    /// Whether the sink can take the response of another attempt after a failed one (the
    /// pipeline retries a request with a sink only if so).
    var takesAnotherAttempt: Bool { get }
    /// After a failed attempt, before the next: waits for the last transfer to end the sink,
    /// readies it for another response, and returns the header fields the next request must
    /// carry (a download's `Range` and `If-Range`, to continue from the bytes it has); nil when
    /// it cannot take one (the request then fails with its error).
    func prepareAnotherAttempt() async -> HTTPFields?
    /// The pipeline gave up after `prepareAnotherAttempt()` readied the sink and before a
    /// transfer took it: end it as a transfer would have. Does nothing otherwise.
    func abandonAnotherAttempt(cancelled: Bool)
    /// The response's trailer fields, told before a successful end when any came.
    func trailersArrived(_ trailers: HTTPFields)
}

extension ResponseSink {
    package var takesAnotherAttempt: Bool { false }
    package func prepareAnotherAttempt() async -> HTTPFields? { nil }
    package func abandonAnotherAttempt(cancelled: Bool) {}
    package var needsFlush: Bool { false }
    package func flush() {}
    package var progressOffset: Int64 { 0 }
    package func checkComplete() -> CourierError? { nil }
    package func trailersArrived(_ trailers: HTTPFields) {}
}

package enum SinkWrite {
    case accepted
    /// Not taken: libcurl keeps the bytes and delivers them again after the engine unpauses
    /// the transfer (`CURL_WRITEFUNC_PAUSE`).
    case pause
    case failed(CourierError)
}

package enum SinkOutcome {
    case completed
    case failed
    case cancelled
}

/// Collects the body in memory, within the size limit (data tasks).
package final class MemorySink: ResponseSink {
    /// Not checked for exclusive access at run time: a sink is used by one thread at a time,
    /// one call after another (`ResponseSink`), and every chunk would otherwise cost a check.
    @exclusivity(unchecked) private var buffer = BodyBuffer()
    private let limit: Int64?

    package init(limit: Int64?) {
        self.limit = limit
    }

    package func begin(_ head: RecordedHead, expectedLength: Int64?) -> CourierError? {
        if let limit, let declared = head.contentLength, declared > limit { return tooLarge(head) }
        if let expectedLength, expectedLength > 0 { buffer.reserve(Int(min(expectedLength, 16 << 20))) }
        return nil
    }

    package func write(_ bytes: UnsafeRawBufferPointer) -> SinkWrite {
        if let limit, Int64(buffer.count + bytes.count) > limit { return .failed(tooLarge(nil)) }
        buffer.append(bytes)
        return .accepted
    }

    package func end(_ outcome: SinkOutcome) -> Data {
        buffer.takeData()
    }

    /// What was collected so far, for error reports.
    package var collected: Data { buffer.copiedData() }

    /// The number of bytes collected so far.
    package var count: Int { buffer.count }

    private func tooLarge(_ head: RecordedHead?) -> CourierError {
        .bodyOverLimit(limit ?? 0, response: head?.response)
    }
}

extension CourierError {
    /// A response body larger than `limit` bytes (after decoding), declared or received: the
    /// memory sink's limit and a request's own. The transfer adds the URL when it reports it.
    package static func bodyOverLimit(_ limit: Int64, response: HTTPResponse? = nil) -> CourierError {
        .responseTooLarge(
            .init(response: response, message: "The response body is larger than the limit of \(limit) bytes"))
    }
}
