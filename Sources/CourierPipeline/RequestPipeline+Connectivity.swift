import CourierCore
import CourierTransport
import Foundation

extension RequestPipeline {
    /// After a send that failed: returns when the request should be sent again because it
    /// failed for want of a route to its host and one has appeared (`waitsForConnectivity`);
    /// throws `error` otherwise, or when the wait outlasts the request's timeout (the
    /// resource timeout, or the request timeout without one); `timedOut` when the call's
    /// deadline (its resource timeout from the call's start) comes first.
    func waitForConnectivity(after error: any Error, _ state: Attempt) async throws {
        guard let failure = error as? CourierError, let url = state.request.url, let host = url.host,
            state.request.sharedOptions.value.unixSocketPath == nil
        else { throw error }
        switch failure {
        case .cannotConnect, .cannotResolveHost: break
        default: throw error
        }
        let monitor = ReachabilityMonitor(host: host)
        guard await !monitor.currentStatus().isReachable else { throw error }
        state.inFlight.observers?.waitingForConnectivity(state.request.head)
        let timeout = state.request.sharedOptions.value.totalTimeout ?? state.request.sharedOptions.value.idleTimeout
        // The call's deadline, when it comes first, ends the wait as a timeout.
        let left = timeLeft(state.inFlight)
        let deadlineFirst = left.map { $0 < timeout } ?? false
        let limit = deadlineFirst ? left ?? timeout : timeout
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
            if deadlineFirst {
                throw state.inFlight.deadlinePassed(while: "waiting for a route to \(host)", after: failure)
            }
            throw failure.withContext {
                $0.message += " (no route to \(host); waited \(limit) for one)"
            }
        }
        guard let fields = await state.inFlight.fieldsForAnotherTransfer() else { throw error }
        for field in fields { state.request.head.headerFields[field.name] = field.value }
    }

}
