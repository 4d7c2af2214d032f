import CourierStorage
import CourierTransport
import Foundation
import HTTPTypes
import Synchronization

/// A session's engines: the libcurl transport of a session, one `CurlEngine` (a multi handle
/// on a thread of its own) per core it may use, up to the configuration's `engineCount`.
///
/// Each request is placed on one engine when its transfer is made (`EnginePlacement`) and stays
/// there, redirects included. What the session keeps whatever the engine is shared
/// (`SessionShares`: cookies, TLS sessions, DNS answers, the bandwidth limit), and so is its
/// limit on transfers at once (`AdmissionQueue`). Above this type nothing knows how many
/// engines there are.
package final class EngineGroup: Transport {
    /// The engines, each with its thread.
    package let engines: [CurlEngine]
    let placement: EnginePlacement
    let shares: SessionShares
    private let ended = Atomic<Bool>(false)

    /// `engineCount` engines (fewer when the total connection limit is smaller) under the
    /// session's `limits`, which hold for the group as a whole.
    package init(engineCount: Int, limits: CurlEngine.Limits) {
        let count = EnginePlacement.engineCount(
            requested: engineCount, maximumConnections: limits.maximumTotalConnections)
        placement = EnginePlacement(engineCount: count, maximumConnectionsPerHost: limits.maximumConnectionsPerHost)
        let shares = SessionShares(
            engineCount: count, cookies: limits.cookies, maximumBytesPerSecond: limits.maximumBytesPerSecond)
        self.shares = shares
        let admission =
            limits.maximumConcurrentTransfers > 0
            ? AdmissionQueue<Transfer>(limit: limits.maximumConcurrentTransfers) : nil
        let perHost = EnginePlacement.shares(of: limits.maximumConnectionsPerHost, engineCount: count)
        let total = EnginePlacement.shares(of: limits.maximumTotalConnections, engineCount: count)
        engines = (0..<count).map { index in
            var own = limits
            own.maximumConnectionsPerHost = perHost[index]
            own.maximumTotalConnections = total[index]
            return CurlEngine(
                limits: own, shares: shares, admission: admission,
                // Linux keeps 15 bytes of a thread's name: "courier-engine-0" would be refused.
                name: count == 1 ? "courier-engine" : "courier-eng-\(index)")
        }
        self.admission = admission
    }

    /// The session's limit on transfers at once, when it has one.
    let admission: AdmissionQueue<Transfer>?

    /// The engine a request to `urlString` goes to.
    func engine(for urlString: String) -> CurlEngine {
        guard engines.count > 1 else { return engines[0] }
        let index = placement.engine(for: EnginePlacement.origin(of: urlString)) { engines[$0].load }
        return engines[index]
    }

    package func sharedHeaders(for fields: HTTPFields, acceptsCompressedResponses: Bool) -> (any Sendable)? {
        HeaderList(fields, hasBody: false, acceptsCompressedResponses: acceptsCompressedResponses)
    }

    package func makeTransfer(
        _ request: consuming TransferRequest, reporters: TransferReporters?, sharedHeaders: (any Sendable)?,
        sink: (any ResponseSink)?, maximumBytesPerSecond: Int64?
    ) -> any TransportTransfer {
        let engine = engine(for: request.urlString)
        return Transfer(
            request: request, engine: engine, reporters: reporters, sharedHeaders: sharedHeaders as? HeaderList,
            sink: sink, maximumBytesPerSecond: maximumBytesPerSecond)
    }

    /// A WebSocket on the engine with the least work: it never shares a connection, so the
    /// origin's engine has nothing to offer it.
    package func makeWebSocket(_ request: TransferRequest, parameters: WebSocketParameters) -> any WebSocketChannel {
        let engine = engines.min { $0.load < $1.load } ?? engines[0]
        return WebSocketConnection(engine: engine, request: request, parameters: parameters)
    }

    /// The cookie engine is shared and guards itself: the work runs here, on the caller's
    /// thread, with no hop to an engine.
    package func withCookieJar<Value: Sendable>(
        _ work: @escaping @Sendable ((any CookieJar)?) -> Value
    ) async -> Value {
        work(ended.load(ordering: .acquiring) ? nil : shares.cookies)
    }

    package func cookieHeader(for urlString: String) -> String? {
        guard let cookies = shares.cookies, !ended.load(ordering: .acquiring) else { return nil }
        return cookies.requestHeader(for: urlString)
    }

    package func shutdown() {
        guard !ended.exchange(true, ordering: .acquiringAndReleasing) else { return }
        for engine in engines { engine.shutdown() }
        // Transfers still waiting for a place never reached an engine's multi handle.
        for transfer in admission?.drain() ?? [] { transfer.cancel() }
    }
}

extension CookieEngine: CookieJar {}
