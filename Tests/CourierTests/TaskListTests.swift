import Courier
import Foundation
import Testing

/// The manager's list of running tasks, cancelling them all while keeping the session, and
/// finishing them before the session ends; against the fault server's slow routes.
@Suite struct TaskListTests {
    /// Waits until `api` lists `count` tasks (or 30 s have passed), and returns the list.
    private func tasks(of api: HTTPSessionManager, count: Int) async throws -> [SessionTask] {
        let deadline = ContinuousClock.now + .seconds(30)
        while api.tasks.count < count, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
        return api.tasks
    }

    @Test func runningTasksAreListedAndCancellingThemAllKeepsTheSession() async throws {
        let api = try await faultManager()
        let slow: JSON = ["n": 300, "delay": 1000]
        let data = api.dataTask(.get, "drip", parameters: slow, serializer: DataResponseSerializer())
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("tasks-\(UUID())")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let download = api.downloadTask("drip", parameters: slow, to: folder.appendingPathComponent("file"))
        let verb = Task { try await api.GET("drip", parameters: slow, serializer: DataResponseSerializer()) }
        let listed = try await tasks(of: api, count: 3)
        #expect(listed.count == 3)
        #expect(Set(listed.map(\.kind)) == [.data, .download])
        #expect(listed.map(\.taskIdentifier) == listed.map(\.taskIdentifier).sorted())
        #expect(listed.allSatisfy { $0.state == .running && $0.method == .get && $0.path == "drip" })
        #expect(api.downloadTasks.count == 1)
        #expect(data.taskIdentifier.map { id in listed.contains { $0.taskIdentifier == id } } == true)
        // Suspended is a state the list shows.
        data.suspend()
        #expect(api.tasks.first { $0.taskIdentifier == data.taskIdentifier }?.state == .suspended)
        data.resume()

        api.cancelAllTasks()
        await #expect(throws: CancellationError.self) { _ = try await data.value }
        await #expect(throws: (any Error).self) { _ = try await download.value }
        await #expect(throws: CancellationError.self) { _ = try await verb.value }
        #expect(try await tasks(of: api, count: 0).isEmpty || api.tasks.allSatisfy { $0.state == .canceling })
        // The session goes on.
        let after = try await api.GET("drip", parameters: ["n": 3, "delay": 1], serializer: DataResponseSerializer())
        #expect(after.count == 3)
    }

    @Test func aTaskListsItsOriginalAndCurrentRequestAcrossARedirect() async throws {
        let fault = try await TestServers.fault()
        let api = try await faultManager { $0.additionalHeaders = ["X-Team": "courier"] }
        let target = fault.appendingPathComponent("drip").absoluteString + "?n=600&delay=1000"
        let task = api.dataTask(
            .get, "redirect", parameters: ["status": 302, "to": .string(target)], serializer: DataResponseSerializer())
        defer { task.cancel() }
        // The redirect is followed at once; the drip then takes five minutes. (Under
        // ThreadSanitizer with the whole suite running, 30 s was not always enough for the
        // first transfer to start.)
        let deadline = ContinuousClock.now + .seconds(240)
        var listed: SessionTask?
        while ContinuousClock.now < deadline {
            listed = api.tasks.first { $0.taskIdentifier == task.taskIdentifier }
            if listed?.currentRequest?.path?.hasPrefix("/drip") == true { break }
            try await Task.sleep(for: .milliseconds(20))
        }
        let entry = try #require(listed)
        #expect(entry.originalRequest?.path?.hasPrefix("/redirect?status=302") == true)
        #expect(entry.originalRequest?.headerFields[HTTPField.Name("X-Team")!] == "courier")
        #expect(entry.currentRequest?.path == "/drip?n=600&delay=1000")
        #expect(entry.currentRequest?.method == .get)
    }

    @Test func finishingRefusesNewWorkLetsRunningTasksEndThenEndsTheSession() async throws {
        let api = try await faultManager()
        let running = api.dataTask(
            .get, "drip", parameters: ["n": 10, "delay": 100], serializer: DataResponseSerializer())
        _ = try await tasks(of: api, count: 1)
        let finished = Task { await api.finishTasksAndInvalidate() }
        // Wait until the session refuses new work, then try some.
        var refusal: (any Error)?
        for _ in 0..<200 where refusal == nil {
            do {
                _ = try await api.GET("drip", parameters: ["n": 1, "delay": 1], serializer: DataResponseSerializer())
                try await Task.sleep(for: .milliseconds(10))
            } catch {
                refusal = error
            }
        }
        #expect(
            isCourierError(refusal) { if case .sessionInvalidated = $0 { true } else { false } },
            "\(String(describing: refusal))")
        let refusedTask = api.dataTask(
            .get, "drip", parameters: ["n": 1, "delay": 1], serializer: DataResponseSerializer())
        #expect(refusedTask.taskIdentifier == nil)
        let taskError = await capturedError { _ = try await refusedTask.value }
        #expect(isCourierError(taskError) { if case .sessionInvalidated = $0 { true } else { false } })
        // The running task was not cut short.
        #expect(try await running.value.count == 10)
        await finished.value
        #expect(api.tasks.isEmpty)
    }
}
