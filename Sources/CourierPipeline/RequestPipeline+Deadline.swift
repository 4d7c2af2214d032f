import Foundation

extension RequestPipeline {
    /// `work`, bounded by the call's deadline when it has one: when the deadline comes first,
    /// the call fails with `timedOut` saying it was `waiting`, and `work` is cancelled and left
    /// to end on its own (an interceptor or a handler that ignores cancellation, or a token
    /// refresh that never returns, cannot hold the call past its resource timeout). The
    /// caller's cancellation ends the wait at once too. Without a deadline, `work` runs as it
    /// would anyway.
    func withinDeadline<Value: Sendable>(
        _ request: InFlightRequest, _ waiting: String, _ work: @escaping @Sendable () async throws -> Value
    ) async throws -> Value {
        guard let deadline = request.deadline else { return try await work() }
        let expired = request.deadlinePassed(while: waiting)
        let left = ContinuousClock.now.duration(to: deadline)
        guard left > .zero else { throw expired }
        let task = Task { try await work() }
        do {
            return try await DetachedWait.value(of: task, timeout: left) { expired }
        } catch {
            task.cancel()
            throw error
        }
    }

    /// How long the call may still wait, when it has a deadline: at least zero.
    func timeLeft(_ request: InFlightRequest) -> Duration? {
        request.deadline.map { max(.zero, ContinuousClock.now.duration(to: $0)) }
    }
}
