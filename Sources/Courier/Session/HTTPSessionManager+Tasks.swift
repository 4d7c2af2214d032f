import Foundation
import HTTPTypes

extension HTTPSessionManager {
    /// The manager's running tasks and requests, oldest first: data tasks and the requests of
    /// the verbs, uploads, downloads and streams, each with its number, kind, state and
    /// controls, as URLSession's `allTasks`. A task leaves the list when its work ends.
    public nonisolated var tasks: [SessionTask] { tasksInFlight.snapshot }

    /// The running data tasks and requests (``SessionTask/Kind/data``).
    public nonisolated var dataTasks: [SessionTask] { tasks.filter { $0.kind == .data } }

    /// The running uploads.
    public nonisolated var uploadTasks: [SessionTask] { tasks.filter { $0.kind == .upload } }

    /// The running downloads.
    public nonisolated var downloadTasks: [SessionTask] { tasks.filter { $0.kind == .download } }

    /// Cancels every running task and request (each throws `CancellationError`, a download
    /// keeps its resume data) and keeps the session: requests made afterwards run as usual.
    /// ``invalidateAndCancel()`` also ends the session.
    public nonisolated func cancelAllTasks() {
        tasksInFlight.cancelAll()
    }

    /// Takes no new work from now on (a new request or task fails with
    /// `CourierError.sessionInvalidated`), lets the running ones finish, and returns when the
    /// last has ended; then closes the session's connections and engines, as
    /// URLSession's `finishTasksAndInvalidate`. It waits as long as the running tasks take
    /// (their timeouts bound that); ``cancelAllTasks()`` ends the wait sooner.
    public nonisolated func finishTasksAndInvalidate() async {
        await tasksInFlight.close()
        invalidateAndCancel()
    }

    /// Refuses new work from now on: each new request, task, stream or WebSocket fails at once
    /// with `CourierError.sessionInvalidated` and `reason` as its message (the first reason
    /// given stays); the running ones go on. ``finishTasksAndInvalidate()`` does this first;
    /// a service that shuts the session down calls it as its shutdown begins, with its own
    /// reason.
    package nonisolated func refuseNewTasks(_ reason: String) {
        tasksInFlight.refuseNewTasks(reason)
    }

    /// The listing of a task of `kind` made now.
    nonisolated func tracking(_ kind: SessionTask.Kind, _ method: HTTPRequest.Method, _ path: String) -> TaskTracking {
        TaskTracking(registry: tasksInFlight, kind: kind, method: method, path: path)
    }

    /// Runs `work` listed among ``tasks``, with a control that ``cancelAllTasks()`` reaches.
    nonisolated func tracked<Result>(
        _ kind: SessionTask.Kind, _ method: HTTPRequest.Method, _ path: String,
        _ work: (TaskControl) async throws -> Result
    ) async throws -> Result {
        let control = TaskControl.forRequest()
        return try await tracking(kind, method, path).register(control).run { try await work(control) }
    }
}
