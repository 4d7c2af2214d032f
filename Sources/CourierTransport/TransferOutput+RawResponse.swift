@_spi(CourierInternals) import CourierCore
import Foundation
import HTTPTypes

extension RawResponse {
    /// The response a transport's output makes.
    package init(_ output: TransferOutput) {
        self.init(
            request: output.request, head: ResponseHead(recorded: output.head), data: output.body,
            metrics: output.metrics)
    }
}
