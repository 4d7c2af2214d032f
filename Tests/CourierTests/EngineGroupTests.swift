import Foundation
import HTTPTypes
import Testing

@testable import Courier
@testable import CourierEngine

/// A session with several engines: where requests run, what stays session-wide (connection
/// limits, transfers at once, cookies, HSTS), against servers (the parts on their own are
/// `EnginePartsTests`, in CourierEngineTests).
@Suite struct EngineGroupTests {
    /// The engine group of `api`.
    static func group(_ api: HTTPSessionManager) throws -> EngineGroup {
        try #require(api.transport as? EngineGroup)
    }

    // MARK: Against servers

    @Test func oneRequestAtATimeReusesOneConnectionWhateverTheEngineCount() async throws {
        let servers = try await TestServers.tls()
        let api = TLSTests.manager { $0.engineCount = 4 }
        let marker = "reuse-\(UUID().uuidString.prefix(8))"
        let url = servers.url("plain").appendingPathComponent("hello.txt").absoluteString + "?\(marker)"
        for _ in 0..<20 { #expect(try await TLSTests.text(api, URL(string: url)!) == "hello\n") }
        let lines = try await servers.accessLogLines(containing: marker, count: 20)
        #expect(Set(lines.map { $0.split(separator: " ")[5] }).count == 1)
    }

    /// Forty requests at once to one origin over four engines, each held by the server until
    /// the test has looked: never more connections than the session's per-host limit, though
    /// several engines carry them.
    @Test(arguments: [2, 6])
    func thePerHostLimitHoldsForTheWholeSession(limit: Int) async throws {
        let server = try await TestServers.dedicatedFaultServer()
        let port = try #require(server.port)
        let api = HTTPSessionManager(
            baseURL: server,
            configuration: {
                var configuration = HTTPSessionConfiguration.ephemeral
                configuration.engineCount = 4
                configuration.maximumConnectionsPerHost = limit
                return configuration
            }())
        let group = try Self.group(api)
        let name = "held-\(UUID().uuidString.prefix(8))"
        let requests = Task {
            try await withThrowingTaskGroup(of: Data.self) { tasks in
                for index in 0..<40 {
                    tasks.addTask {
                        try await api.GET(
                            "ndjson/\(name)", parameters: ["i": .int(index)], serializer: DataResponseSerializer())
                    }
                }
                return try await tasks.reduce(into: []) { $0.append($1) }
            }
        }
        // Until the server holds a full set of connections, and the requests sit on engines.
        var connections = 0
        var busyEngines = 0
        let deadline = ContinuousClock.now + .seconds(60)
        while (connections < limit || busyEngines < 2), ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
            connections = try clientConnections(toPort: port)
            busyEngines = group.engines.filter { $0.load > 0 }.count
        }
        try await Task.sleep(for: .milliseconds(200))  // time to open one too many, if it would
        let most = max(connections, try clientConnections(toPort: port))
        // Where the requests were when the connections were counted: which engines of the
        // origin's window held them (a window is at most `limit` engines wide).
        let loads = group.engines.map(\.load)
        // From another session: this one's connections to the server are all taken.
        let releaser = HTTPSessionManager(baseURL: server, configuration: .ephemeral)
        let _: Data = try await releaser.GET("release/\(name)", serializer: DataResponseSerializer())
        let bodies = try await requests.value
        #expect(bodies.count == 40 && bodies.allSatisfy { $0 == Data("{\"n\": 1}\n{\"n\": 2}\n".utf8) })
        #expect(most == limit, "\(most) connections at once; transfers per engine: \(loads)")
        #expect(busyEngines >= 2, "the requests ran on \(busyEngines) engine(s)")
    }

    /// Several engines, one HTTP/2 origin: each engine multiplexes its requests on one
    /// connection, so a hundred requests use no more connections than there are engines.
    @Test func http2KeepsMultiplexingOnEveryEngine() async throws {
        let servers = try await TestServers.tls()
        let api = TLSTests.trusting(servers) { $0.engineCount = 2 }
        let connections = try await TLSTests.concurrentHTTP2Connections(api, servers, count: 100).connections
        #expect((1...2).contains(connections))
    }

    /// Eight requests over four engines with two tasks at a time, each held by the server until
    /// the test has looked: two run, six wait, and no third starts while the two are held.
    @Test func tasksAtOnceAreLimitedAcrossTheEngines() async throws {
        let api = try await faultManager {
            $0.engineCount = 4
            $0.maximumConcurrentTasks = 2
        }
        let group = try Self.group(api)
        let name = "admit-\(UUID().uuidString.prefix(8))"
        let running = Task {
            try await withThrowingTaskGroup(of: Data.self) { tasks in
                for index in 0..<8 {
                    tasks.addTask {
                        try await api.GET(
                            "ndjson/\(name)", parameters: ["i": .int(index)], serializer: DataResponseSerializer())
                    }
                }
                return try await tasks.reduce(into: []) { $0.append($1) }
            }
        }
        func counts() -> (running: Int, waiting: Int) { group.admission?.counts ?? (running: 0, waiting: 0) }
        let deadline = ContinuousClock.now + .seconds(60)
        while counts().running + counts().waiting < 8, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(10))
        }
        try await Task.sleep(for: .milliseconds(200))  // time to admit one too many, if it would
        let held = counts()
        let releaser = HTTPSessionManager(baseURL: try await TestServers.fault(), configuration: .ephemeral)
        let _: Data = try await releaser.GET("release/\(name)", serializer: DataResponseSerializer())
        let bodies = try await running.value
        #expect(held.running == 2 && held.waiting == 6, "\(held)")
        #expect(bodies.count == 8 && bodies.allSatisfy { $0 == Data("{\"n\": 1}\n{\"n\": 2}\n".utf8) })
    }

    @Test func cookiesSetOnAnyEngineGoWithRequestsOnEveryEngine() async throws {
        let api = try await httpbinManager { $0.engineCount = 4 }
        // Twenty responses at once, on whichever engines, each setting a cookie.
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            for index in 0..<20 {
                tasks.addTask {
                    let _: JSON = try await api.GET("cookies/set", parameters: ["k\(index)": .string("v\(index)")])
                }
            }
            try await tasks.waitForAll()
        }
        #expect(await api.cookies.all().count == 20)
        // Twenty requests at once, on whichever engines: each carries all twenty.
        let replies = try await withThrowingTaskGroup(of: JSON.self) { tasks in
            for _ in 0..<20 { tasks.addTask { try await api.GET("cookies") } }
            return try await tasks.reduce(into: []) { $0.append($1) }
        }
        #expect(replies.allSatisfy { $0["cookies"].objectValue?.count == 20 })
    }

    @Test func hstsFromOneEngineUpgradesRequestsOnEveryEngine() async throws {
        let servers = try await TestServers.tls()
        let api = TLSTests.trusting(servers) { $0.engineCount = 4 }
        _ = try await TLSTests.text(api, servers.url("valid").appendingPathComponent("hsts"))
        let plain = TLSTests.plainToTLSPort(servers).absoluteString
        let responses = try await withThrowingTaskGroup(of: DataResponse<String>.self) { tasks in
            for _ in 0..<20 {
                tasks.addTask { try await api.request(.get, plain, serializer: StringResponseSerializer()) }
            }
            return try await tasks.reduce(into: []) { $0.append($1) }
        }
        #expect(responses.allSatisfy { $0.request.scheme == "https" && $0.value.hasPrefix("TLSv1.3") })
    }

    @Test func cancellingTheSessionEndsTheRequestsOfEveryEngine() async throws {
        let api = try await faultManager { $0.engineCount = 4 }
        let group = try Self.group(api)
        let tasks = (0..<40).map { index in
            api.dataTask(.get, "silent", parameters: ["i": .int(index)], serializer: DataResponseSerializer())
        }
        while group.engines.filter({ $0.load > 0 }).count < 2 { try await Task.sleep(for: .milliseconds(10)) }
        api.invalidateAndCancel()
        for task in tasks { await #expect(throws: CancellationError.self) { _ = try await task.value } }
        // And the session refuses what comes after.
        await #expect(throws: CancellationError.self) {
            _ = try await api.request(.get, "bytes", serializer: DataResponseSerializer())
        }
    }

    @Test func eachEngineThreadHasItsNameInTheProcessList() async throws {
        let api = try await faultManager { $0.engineCount = 3 }
        defer { api.invalidateAndCancel() }
        _ = try await api.request(.get, "bytes", serializer: DataResponseSerializer())
        // What top, perf and gdb show: Linux keeps 15 bytes of a thread's name.
        let tasks = try FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")
        let names = Set(
            tasks.compactMap { try? String(contentsOfFile: "/proc/self/task/\($0)/comm", encoding: .utf8) }
                .map { $0.trimmingCharacters(in: .newlines) })
        #expect(names.isSuperset(of: ["courier-eng-0", "courier-eng-1", "courier-eng-2"]))
    }

    @Test func aBackgroundSessionRunsOneEngine() throws {
        let home = try DownloadTests.temporaryDirectory()
        var configuration = HTTPSessionConfiguration.background(identifier: "engines-\(UUID().uuidString.prefix(8))")
        configuration.storageDirectory = home
        configuration.engineCount = 4
        let api = HTTPSessionManager(configuration: configuration)
        defer { api.invalidateAndCancel() }
        #expect(try Self.group(api).engines.count == 1)
        #expect(
            try Self.group(HTTPSessionManager(configuration: .ephemeral)).engines.count
                == HTTPSessionConfiguration.defaultEngineCount)
    }
}

/// Request priority: the order in which the session's queue starts held-back requests.
@Suite struct RequestPriorityTests {
    @Test func higherPrioritiesLeaveTheQueueFirst() async throws {
        let api = try await faultManager { $0.maximumConcurrentTasks = 1 }
        let group = try EngineGroupTests.group(api)
        // One request holds the only place until it is released; three more wait behind it.
        let held = "held-\(UUID().uuidString.prefix(8))"
        let blocker = api.dataTask(.get, "ndjson/\(held)", serializer: DataResponseSerializer())
        _ = try await blocker.head
        let name = "priority-\(UUID().uuidString.prefix(8))"
        func waiting(_ priority: RequestPriority) -> DataTask<String> {
            api.dataTask(
                .get, "cache-probe/\(name)", parameters: ["p": .string("\(priority)")],
                options: RequestOptions(priority: priority), serializer: StringResponseSerializer())
        }
        let low = waiting(.low)
        let normal = waiting(.normal)
        let high = waiting(.high)
        let deadline = ContinuousClock.now + .seconds(60)
        while group.admission?.counts.waiting != 3, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(10))
        }
        let _: Data = try await HTTPSessionManager(baseURL: try await TestServers.fault(), configuration: .ephemeral)
            .GET("release/\(held)", serializer: DataResponseSerializer())
        _ = try await blocker.value
        // The probe numbers its answers in arrival order.
        let order = [try await high.value, try await normal.value, try await low.value]
        #expect(order == ["response 1", "response 2", "response 3"])
    }
}
