import CourierCore
import Foundation
import HTTPTypes

/// What a finished transfer produced.
///
/// A reference, not a struct: the output (the final request, the head, the body, the metrics:
/// about 600 bytes) travels through the continuation that the engine resumes and the async
/// frames of every caller up to the pipeline, and each of those frames would otherwise hold
/// room for it (memory per request in flight, and task-allocator slabs `malloc`ed per request).
package final class TransferOutput: Sendable {
    /// The request of the final hop (after redirects).
    let request: HTTPRequest
    /// The recorded response head; turned into an `HTTPResponse` on the caller's side.
    package let head: RecordedHead
    let body: Data
    let metrics: TransferMetrics

    /// The output of a finished transfer.
    package init(request: HTTPRequest, head: RecordedHead, body: Data, metrics: TransferMetrics) {
        self.request = request
        self.head = head
        self.body = body
        self.metrics = metrics
    }

    /// The same output for a call that waited for another call's transfer (request
    /// coalescing): its metrics name the call that sent it.
    package func coalesced(from requestID: UInt64) -> TransferOutput {
        var metrics = metrics
        metrics.coalescedFrom = requestID
        return TransferOutput(request: request, head: head, body: body, metrics: metrics)
    }
}
