@_spi(CourierInternals) import CourierCore
import CourierStorage
import CourierTransport
import Foundation
import HTTPTypes

/// The libcurl engine as the pipeline's transport.
extension CurlDriver: Transport {
    package func sharedHeaders(for fields: HTTPFields, acceptsCompressedResponses: Bool) -> (any Sendable)? {
        HeaderList(fields, hasBody: false, acceptsCompressedResponses: acceptsCompressedResponses)
    }

    package func makeTransfer(
        _ request: TransferRequest, reporters: TransferReporters?, sharedHeaders: (any Sendable)?,
        sink: (any ResponseSink)?, maximumBytesPerSecond: Int64?
    ) -> any TransportTransfer {
        Transfer(
            request: request, driver: self, reporters: reporters, sharedHeaders: sharedHeaders as? HeaderList,
            sink: sink, maximumBytesPerSecond: maximumBytesPerSecond)
    }

    package func withCookieJar<Value: Sendable>(
        _ work: @escaping @Sendable ((any CookieJar)?) -> Value
    ) async -> Value {
        await withCheckedContinuation { continuation in
            let submitted = submit(.run { driver in continuation.resume(returning: work(driver.cookies)) })
            if !submitted { continuation.resume(returning: work(nil)) }
        }
    }
}

extension Transfer: TransportTransfer {
    package func resumeReceiving() {
        _ = driver.submit(.resumeReceiving(self))
    }
}

extension CookieEngine: CookieJar {}
