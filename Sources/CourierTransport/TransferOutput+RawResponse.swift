import CourierCore
import Foundation

extension RawResponse {
    /// The response a transport's output makes.
    package init(_ output: TransferOutput) {
        let head = ResponseHead(recorded: output.head)
        var metrics = output.metrics
        metrics.final = TransferMetrics.FinalTransaction(request: output.request, head: head)
        self.init(request: output.request, head: head, data: output.body, metrics: metrics)
    }
}
