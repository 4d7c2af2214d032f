import Courier
import Foundation
import Testing

@testable import CourierEngine

/// `maximumConnectionAge` and `maximumRequestsPerConnection` against the fault server (which
/// keeps connections alive): a spent connection carries no further request, and the next one
/// goes out on a new connection, seen by its local port (`metrics.localPort`, the client side
/// of the connection the server accepted) and by `reusedConnection`. One engine and one
/// connection per host, so that a new port can only mean a new connection; no cache, so that
/// every response comes over a connection.
@Suite struct ConnectionLifetimeTests {
    /// Sends `count` GETs one after another; each response's local port and whether it reused
    /// a connection.
    private func send(_ count: Int, on api: HTTPSessionManager) async throws -> [(port: Int, reused: Bool)] {
        var seen: [(port: Int, reused: Bool)] = []
        for _ in 0..<count {
            let response = try await api.request(
                .get, "bytes", parameters: .object(["n": .int(16)]), serializer: DataResponseSerializer())
            #expect(response.status.code == 200)
            #expect(response.value.count == 16)
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
            configuration.httpVersion = .http1_1
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

    @Test func anIdleConnectionPastItsAgeIsNotReused() async throws {
        let age = Duration.seconds(1)
        let api = try await manager { $0.maximumConnectionAge = age }
        let opened = ContinuousClock.now
        let young = try await send(2, on: api)
        // A young connection is reused as any other. (Only checked when both requests were
        // over well within the age: on a loaded machine the second may rightly have gone out
        // on a new connection.)
        if ContinuousClock.now - opened < age / 2 {
            #expect(young.map(\.reused) == [false, true])
            #expect(young[0].port == young[1].port)
        }
        // The connection that carried the second request passes its age while idle (it was
        // opened before that request ended; libcurl counts whole seconds, so a second more).
        try await Task.sleep(until: ContinuousClock.now + age + .milliseconds(1_500))
        let old = try await send(2, on: api)
        if CurlRuntime.versionNumber >= 0x07_50_00 {
            // libcurl refuses it (CURLOPT_MAXLIFETIME_CONN, 7.80).
            #expect(old[0].reused == false)
            #expect(old[0].port != young[1].port)
        } else if old[0].reused {
            // Before 7.80 it carries one more request, after which the engine retires it.
            #expect(old[0].port == young[1].port)
            #expect(old[1].reused == false)
            #expect(old[1].port != young[1].port)
        } else {
            // Or the engine retired it already, as the second request ended (on a machine so
            // loaded that the connection had reached its age by then).
            #expect(old[0].port != young[1].port)
        }
    }

    @Test func aBusyConnectionIsRetiredAtItsAge() async throws {
        let age = Duration.seconds(1)
        let api = try await manager { $0.maximumConnectionAge = age }
        // Requests back to back, so that the connection is never idle for long, until one is
        // sent when the connection is past its age (it was opened before the first response):
        // that one retires it as it ends. Decided by when a request was sent, not by when its
        // caller resumed after it (a loaded machine may resume it seconds after the response).
        var ports = try await send(1, on: api).map(\.port)
        let firstAnswered = ContinuousClock.now
        while true {
            let sent = ContinuousClock.now
            ports += try await send(1, on: api).map(\.port)
            if sent - firstAnswered >= age + .milliseconds(300) { break }
        }
        // The next request goes on a new connection (or that one did already: from 7.80 libcurl
        // refuses an idle connection past its age itself).
        ports += try await send(1, on: api).map(\.port)
        #expect(Set(ports).count >= 2)
        #expect(ports.first != ports.last)
    }
}
