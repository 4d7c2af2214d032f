@_spi(CourierInternals) import CourierCore
import CourierStorage
import CourierTransport
import Foundation
import HTTPTypes

/// The libcurl engine as the pipeline's transport.
extension CurlEngine: Transport {
    package func sharedHeaders(for fields: HTTPFields, acceptsCompressedResponses: Bool) -> (any Sendable)? {
        HeaderList(fields, hasBody: false, acceptsCompressedResponses: acceptsCompressedResponses)
    }

    package func makeTransfer(
        _ request: TransferRequest, reporters: TransferReporters?, sharedHeaders: (any Sendable)?,
        sink: (any ResponseSink)?, maximumBytesPerSecond: Int64?
    ) -> any TransportTransfer {
        Transfer(
            request: request, engine: self, reporters: reporters, sharedHeaders: sharedHeaders as? HeaderList,
            sink: sink, maximumBytesPerSecond: maximumBytesPerSecond)
    }

    package func withCookieJar<Value: Sendable>(
        _ work: @escaping @Sendable ((any CookieJar)?) -> Value
    ) async -> Value {
        await withCheckedContinuation { continuation in
            let submitted = submit(.run { engine in continuation.resume(returning: work(engine.cookies)) })
            if !submitted { continuation.resume(returning: work(nil)) }
        }
    }
}

extension Transfer: TransportTransfer {
    package func resumeReceiving() {
        _ = engine.submit(.resumeReceiving(self))
    }
}

extension CookieEngine: CookieJar {}
