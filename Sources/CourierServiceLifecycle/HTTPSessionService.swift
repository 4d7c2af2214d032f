import Courier
import ServiceLifecycle

/// An `HTTPSessionManager` as a service of a swift-service-lifecycle `ServiceGroup`: it
/// runs until the group's graceful shutdown, then refuses new requests, lets the running ones
/// finish within ``shutdownDeadline``, cancels those still running at the deadline, and ends
/// the session.
///
/// ```swift
/// let api = HTTPSessionManager(baseURL: URL(string: "https://api.example.com/v1/")!)
/// let group = ServiceGroup(
///     services: [HTTPSessionService(manager: api, shutdownDeadline: .seconds(10)), server],
///     gracefulShutdownSignals: [.sigterm, .sigint],
///     logger: logger)
/// try await group.run()
/// ```
///
/// Put the session's service before the services that send requests through it: a group
/// shuts its services down in reverse order, so the server above finishes the requests it is
/// serving (and the calls they make through `api`) before the session stops taking new ones.
///
/// When the shutdown begins, every request, task, stream or WebSocket made through the
/// manager from then on fails at once with `CourierError.sessionInvalidated`, whose message
/// says the session is shutting down. The running requests and tasks (the manager's `tasks`)
/// go on; at ``shutdownDeadline`` those still running are cancelled (each throws
/// `CancellationError`, a download keeps its resume data). When the last has ended, the
/// manager is invalidated (`finishTasksAndInvalidate()`): its connections close, its engine
/// threads end, and the WebSockets still open end with `sessionInvalidated`. Then ``run()``
/// returns.
///
/// When the group cancels the service instead (a cancellation signal, another service that
/// failed, the group's `maximumGracefulShutdownDuration`), the running requests are cancelled
/// at once, in the same order of events.
///
/// A background session (`HTTPSessionConfiguration.background(identifier:)`) is shut down the
/// same way but for its tasks still running at the deadline (or at a cancellation): those are
/// left to its journal, not cancelled, and the session is not invalidated, since either would
/// remove them for good. The next process's `restoredTasks()` carries them on.
public struct HTTPSessionService: Service, CustomStringConvertible {
    /// The session the service runs.
    public let manager: HTTPSessionManager
    /// How long the requests and tasks running when the graceful shutdown begins may take to
    /// finish; then they are cancelled.
    public let shutdownDeadline: Duration

    /// A service for `manager`, whose running requests get `shutdownDeadline` to finish once
    /// the group shuts down gracefully (10 seconds unless given: well inside the 30 seconds a
    /// container orchestrator usually leaves between `SIGTERM` and `SIGKILL`, with room for
    /// the services that shut down before it).
    public init(manager: HTTPSessionManager, shutdownDeadline: Duration = .seconds(10)) {
        self.manager = manager
        self.shutdownDeadline = shutdownDeadline
    }

    /// Waits for the group's graceful shutdown (or the task's cancellation), then shuts the
    /// session down as the type's description says, and returns when it has ended.
    public func run() async throws {
        let cancelled: Bool
        do {
            try await gracefulShutdown()
            cancelled = false
        } catch {
            cancelled = true
        }
        await shutDown(cancelled: cancelled)
    }

    /// The service as the group's log names it: the type and the manager's base URL.
    public var description: String {
        "HTTPSessionService(\(manager.baseURL?.absoluteString ?? "no base URL"))"
    }

    /// Refuses new work, gives the running tasks until the deadline (none when `cancelled`),
    /// cancels what is left, and invalidates the session.
    private func shutDown(cancelled: Bool) async {
        let reason =
            cancelled
            ? "The session is shutting down (its service was cancelled) and takes no new requests"
            : "The session is shutting down (its service group is shutting down gracefully) and takes no new requests"
        manager.refuseNewTasks(reason)
        let deadline: Duration = cancelled ? .zero : shutdownDeadline
        manager.logger.info(
            "Courier session shutting down",
            metadata: [
                "courier.running_tasks": "\(manager.tasks.count)",
                "courier.shutdown_deadline": "\(deadline)",
            ])
        if case .background = manager.configuration.kind {
            await leaveToTheJournal(after: deadline)
            return
        }
        if cancelled {
            manager.cancelAllTasks()
            await manager.finishTasksAndInvalidate()
            return
        }
        let manager = self.manager
        await withTaskGroup(of: Bool.self) { group in
            group.addTask {
                await manager.finishTasksAndInvalidate()
                return true
            }
            group.addTask {
                // Ends early when the service is cancelled while it waits: cancel at once then.
                try? await Task.sleep(for: deadline)
                return false
            }
            if await group.next() == false {
                let left = manager.tasks.count
                if left > 0 {
                    manager.logger.notice(
                        "Courier session shutdown deadline passed: cancelling the requests still running",
                        metadata: ["courier.running_tasks": "\(left)"])
                }
                manager.cancelAllTasks()
                _ = await group.next()
            }
            group.cancelAll()
        }
    }

    /// A background session's shutdown: its tasks get until `deadline` to finish (then the
    /// session is invalidated); those still running then are left to run until the process
    /// ends, their journal entries kept for the next process.
    private func leaveToTheJournal(after deadline: Duration) async {
        let clock = ContinuousClock()
        let end = clock.now + deadline
        while !manager.tasks.isEmpty, clock.now < end {
            do {
                try await Task.sleep(for: .milliseconds(20))
            } catch {
                break
            }
        }
        let left = manager.tasks.count
        guard left > 0 else {
            await manager.finishTasksAndInvalidate()
            return
        }
        manager.logger.notice(
            "Courier background session shutdown deadline passed: its running tasks are left to its journal",
            metadata: ["courier.running_tasks": "\(left)"])
    }
}
