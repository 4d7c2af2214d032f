import Courier
import Foundation
import Testing

/// Broken servers: silence, connections that close early, lying lengths, bad encodings.
@Suite struct FaultTests {
    @Test func aServerThatStopsAfterTheHeadTimesOutWithTheHead() async throws {
        let api = try await faultManager { $0.requestTimeout = .seconds(1) }
        let error = await capturedError { _ = try await api.GET("silent-after-headers") }
        guard case CourierError.timedOut(let context)? = error else {
            Issue.record("expected timedOut, got \(String(describing: error))")
            return
        }
        #expect(context.response?.status == .ok)
    }

    @Test func theResourceTimeoutBoundsTheWholeTransfer() async throws {
        let api = try await faultManager { $0.resourceTimeout = .milliseconds(800) }
        let error = await capturedError {
            _ = try await api.GET("drip", parameters: ["n": 50, "delay": 100], serializer: DataResponseSerializer())
        }
        #expect(isCourierError(error!) { if case .timedOut = $0 { true } else { false } })
    }

    @Test func aConnectionClosedMidBodyIsConnectionLostWithThePartialBody() async throws {
        let api = try await faultManager()
        let error = await capturedError {
            _ = try await api.GET(
                "close-mid-body", parameters: ["n": 100_000, "sent": 30_000], serializer: DataResponseSerializer())
        }
        guard case CourierError.connectionLost(let context)? = error else {
            Issue.record("expected connectionLost, got \(String(describing: error))")
            return
        }
        #expect(context.response?.status == .ok)
        #expect(context.body == faultBytes(30_000))
        #expect(context.curlCode == 18)
    }

    @Test func aContentLengthThatLiesIsConnectionLost() async throws {
        let api = try await faultManager()
        let error = await capturedError {
            _ = try await api.GET(
                "lying-length", parameters: ["n": 10, "claimed": 1000], serializer: DataResponseSerializer())
        }
        #expect(isCourierError(error!) { if case .connectionLost = $0 { true } else { false } })
    }

    @Test func aContentLengthThatLiesOnAnOpenConnectionTimesOut() async throws {
        let api = try await faultManager { $0.requestTimeout = .seconds(1) }
        let error = await capturedError {
            _ = try await api.GET(
                "lying-length-open", parameters: ["n": 10, "claimed": 1000], serializer: DataResponseSerializer())
        }
        #expect(isCourierError(error!) { if case .timedOut = $0 { true } else { false } })
    }

    @Test func aHeadWithoutBodyIsConnectionLost() async throws {
        let api = try await faultManager()
        let error = await capturedError {
            _ = try await api.GET("headers-then-close", serializer: DataResponseSerializer())
        }
        #expect(isCourierError(error!) { if case .connectionLost = $0 { true } else { false } })
    }

    @Test func malformedChunkedEncodingFails() async throws {
        let api = try await faultManager()
        let error = await capturedError {
            _ = try await api.GET("malformed-chunked", serializer: DataResponseSerializer())
        }
        guard case CourierError.invalidResponse(let context)? = error else {
            Issue.record("expected invalidResponse, got \(String(describing: error))")
            return
        }
        #expect(context.message.hasPrefix("Malformed chunked encoding: "))
        #expect(context.response?.status == .ok)
        #expect(context.curlCode == 56)
    }

    @Test func chunkedBodiesArriveWhole() async throws {
        let api = try await faultManager()
        let data = try await api.GET(
            "chunked", parameters: ["n": 100_000, "chunk": 777], serializer: DataResponseSerializer())
        #expect(data == faultBytes(100_000))
    }

    @Test func aDecompressionBombStopsAtTheLimit() async throws {
        let api = try await faultManager { $0.maximumResponseSize = 1 << 20 }
        for path in ["bomb", "bomb-chunked"] {
            let error = await capturedError {
                _ = try await api.GET(path, parameters: ["mb": 64], serializer: DataResponseSerializer())
            }
            #expect(isCourierError(error!) { if case .responseTooLarge = $0 { true } else { false } }, "\(path)")
        }
    }

    @Test func aDeclaredLengthOverTheLimitFailsBeforeTheBody() async throws {
        let api = try await faultManager { $0.maximumResponseSize = 1000 }
        let error = await capturedError {
            _ = try await api.GET("bytes", parameters: ["n": 5000], serializer: DataResponseSerializer())
        }
        #expect(isCourierError(error!) { if case .responseTooLarge = $0 { true } else { false } })
        let small = try await api.GET("bytes", parameters: ["n": 1000], serializer: DataResponseSerializer())
        #expect(small.count == 1000)
    }

    @Test func aRefusedConnectionIsCannotConnect() async throws {
        // Bind a port, close it, and connect to it: nobody listens there.
        let port = try unusedPort()
        // One engine: the second failure below takes the error buffer the first one used.
        var configuration = HTTPSessionConfiguration.ephemeral
        configuration.engineCount = 1
        let api = HTTPSessionManager(baseURL: URL(string: "http://127.0.0.1:\(port)/"), configuration: configuration)
        let error = await capturedError { _ = try await api.GET("x") }
        #expect(isCourierError(error!) { if case .cannotConnect = $0 { true } else { false } })
        // libcurl's own account of the failure (its error buffer) names the port; the generic
        // text for its code ("Couldn't connect to server") would not.
        let message = (error as? CourierError)?.context.message ?? ""
        #expect(message.contains(String(port)), "\(message)")
        // A second failure, on the same engine, gets its own account, not the first one's.
        let other = try unusedPort()
        let again = await capturedError { _ = try await api.GET("http://127.0.0.1:\(other)/y") }
        let second = (again as? CourierError)?.context.message ?? ""
        #expect(second.contains(String(other)), "\(second)")
    }

    @Test func anUnknownHostIsCannotResolveHost() async throws {
        let api = HTTPSessionManager(configuration: .ephemeral)
        let error = await capturedError { _ = try await api.GET("http://no-such-host.invalid/") }
        #expect(isCourierError(error!) { if case .cannotResolveHost = $0 { true } else { false } })
    }
}

/// A loopback port nobody listens on (bound, then closed).
func unusedPort() throws -> Int {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = 0
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0
        }
    }
    guard bound else { throw TestServerError("bind failed") }
    return Int(UInt16(bigEndian: address.sin_port))
}
