@_spi(CourierInternals) import CourierCore
import CourierTransport
import Foundation
import HTTPTypes

extension RequestPipeline {
    /// After a send that failed: returns when the request should be sent again because it
    /// failed for want of a route to its host and one has appeared (`waitsForConnectivity`);
    /// throws `error` otherwise, or when the wait outlasts the request's timeout (the
    /// resource timeout, or the request timeout without one).
    func waitForConnectivity(after error: any Error, _ state: Attempt) async throws {
        guard let failure = error as? CourierError, let url = state.request.url, let host = url.host,
            state.request.options.unixSocketPath == nil
        else { throw error }
        switch failure {
        case .cannotConnect, .cannotResolveHost: break
        default: throw error
        }
        let monitor = ReachabilityMonitor(host: host)
        guard await !monitor.currentStatus().isReachable else { throw error }
        state.call.observers?.waitingForConnectivity(state.request.head)
        let limit = state.request.options.totalTimeout ?? state.request.options.idleTimeout
        let found = try await withThrowingTaskGroup(of: Bool.self) { group in
            group.addTask {
                try await monitor.waitUntilReachable()
                return true
            }
            group.addTask {
                try await Task.sleep(for: limit)
                return false
            }
            defer { group.cancelAll() }
            return try await group.next() ?? false
        }
        guard found else {
            throw failure.withContext {
                $0.message += " (no route to \(host); waited \(limit) for one)"
            }
        }
        guard let fields = await state.call.fieldsForAnotherTransfer() else { throw error }
        for field in fields { state.request.head.headerFields[field.name] = field.value }
    }

}
