import Courier
import Foundation
import Testing

/// `maximumConnectionAge` and `maximumRequestsPerConnection` against the fault server (which
/// keeps connections alive): a spent connection carries no further request, and the next one
/// goes out on a new connection, seen by its local port (`metrics.localPort`, the client side
/// of the connection the server accepted) and by `reusedConnection`. One engine and one
/// connection per host, so that a new port can only mean a new connection; no cache, so that
/// every response comes over a connection.
@Suite struct ConnectionLifetimeTests {
    /// Sends `count` GETs one after another; each response's local port and whether it reused
    /// a connection.
    private func send(
        _ count: Int, _ path: String = "bytes", parameters: [String: Int] = ["n": 16], on api: HTTPSessionManager
    ) async throws -> [(port: Int, reused: Bool)] {
        var seen: [(port: Int, reused: Bool)] = []
        for _ in 0..<count {
            let response = try await api.request(
                .get, path, parameters: .object(parameters.mapValues { .int($0) }),
                serializer: DataResponseSerializer())
            #expect(response.status.code == 200)
            seen.append((response.metrics.localPort, response.metrics.reusedConnection))
        }
        return seen
    }

    private func manager(
        _ configure: @escaping (inout HTTPSessionConfiguration) -> Void
    ) async throws -> HTTPSessionManager {
        try await faultManager { configuration in
            configuration.engineCount = 1
            configuration.maximumConnectionsPerHost = 1
            configuration.cachePolicy = .reloadIgnoringCacheData
            configure(&configuration)
        }
    }

    @Test func withoutLimitsOneConnectionCarriesEveryRequest() async throws {
        let api = try await manager { _ in }
        let seen = try await send(4, on: api)
        #expect(Set(seen.map(\.port)).count == 1)
        #expect(seen.map(\.reused) == [false, true, true, true])
    }

    @Test func aConnectionCarriesAtMostItsRequests() async throws {
        let api = try await manager { $0.maximumRequestsPerConnection = 2 }
        let seen = try await send(5, on: api)
        #expect(seen.map(\.reused) == [false, true, false, true, false])
        #expect(seen[0].port == seen[1].port)
        #expect(seen[2].port == seen[3].port)
        #expect(Set([seen[0].port, seen[2].port, seen[4].port]).count == 3)
    }

    @Test func anIdleConnectionIsRetiredAtItsAge() async throws {
        let age = Duration.seconds(2)
        let api = try await manager { $0.maximumConnectionAge = age }
        let opened = ContinuousClock.now
        let young = try await send(2, on: api)
        // A young connection is reused as any other. (Only checked when both requests were
        // over well within the age: a loaded machine may take longer, and then the second
        // request rightly went out on a new connection.)
        if ContinuousClock.now - opened < age / 2 {
            #expect(young.map(\.reused) == [false, true])
            #expect(young[0].port == young[1].port)
        }
        // The connection reaches its age while idle, and nothing else happens on the session.
        try await Task.sleep(until: opened + age + .milliseconds(500))
        let old = try await send(1, on: api)
        #expect(old[0].reused == false)
        #expect(old[0].port != young[1].port)
    }

    @Test func aConnectionThatAgesDuringItsRequestCarriesNoOther() async throws {
        let api = try await manager { $0.maximumConnectionAge = .milliseconds(300) }
        // A body dripped over about 800 ms: the connection passes its age mid-request.
        let slow = try await send(1, "drip", parameters: ["n": 4, "delay": 200], on: api)
        let next = try await send(1, on: api)
        #expect(next[0].reused == false)
        #expect(next[0].port != slow[0].port)
    }
}
