import Courier
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `SocketOptions`, per session and per request: the source address as the server sees it
/// (httpbin's `/ip`), the IP version, and the options the kernel holds for a connection (read
/// back with `getsockopt` from the socket of the connection that carried the response, found
/// in this process by its two ends; against the fault server, which keeps an idle connection
/// for a minute where httpbin keeps it for five seconds).
@Suite struct SocketOptionsTests {
    private func origin(_ api: HTTPSessionManager, options: RequestOptions = RequestOptions()) async throws -> String? {
        let reply: JSON = try await api.GET("ip", options: options)
        if case .string(let origin) = reply["origin"] { return origin }
        return nil
    }

    @Test func aSessionSendsFromItsSourceAddress() async throws {
        let api = try await httpbinManager { $0.socket.source = .address("127.0.0.2") }
        #expect(try await origin(api) == "127.0.0.2")
    }

    @Test func aRequestSendsFromItsOwnSourceAddress() async throws {
        let api = try await httpbinManager()
        var options = RequestOptions()
        options.socket = SocketOptions()
        options.socket?.source = .address("127.0.0.3")
        // The session's requests go as the routing table says; the one with a source, from it,
        // on a connection of its own even though the session has one open to the server.
        #expect(try await origin(api) == "127.0.0.1")
        #expect(try await origin(api, options: options) == "127.0.0.3")
        #expect(try await origin(api, options: options) == "127.0.0.3")
    }

    @Test func aSourceThatIsNotThereFailsBeforeAnythingIsSent() async throws {
        let api = try await faultManager()
        for source in [SocketOptions.Source.address("not-an-address"), .address("10.0.0.300"), .interface("nosuch9")] {
            let name = "source-\(UUID().uuidString.prefix(8))"
            var options = RequestOptions()
            options.socket = SocketOptions()
            options.socket?.source = source
            let error = await capturedError {
                let _: Data = try await api.GET("flaky/\(name)", options: options, serializer: DataResponseSerializer())
            }
            guard case .cannotConnect(let context) = error as? CourierError else {
                Issue.record("\(source): expected cannotConnect, got \(String(describing: error))")
                continue
            }
            #expect(context.message.contains("interface") || context.message.contains("address"))
            #expect(try await RetryTests.stats(name)["requests"] == 0)
        }
    }

    @Test func anInterfaceIsSentFrom() async throws {
        // Binding to a device needs CAP_NET_RAW (root here, in CI).
        guard geteuid() == 0 else { return }
        let api = try await httpbinManager { $0.socket.source = .interface("lo") }
        #expect(try await origin(api) == "127.0.0.1")
    }

    @Test func anAddressFamilyKeepsToItsVersion() async throws {
        // The test servers listen on 127.0.0.1 only; `localhost` names it (and may name ::1).
        let base = try await TestServers.httpbin()
        var components = try #require(URLComponents(url: base, resolvingAgainstBaseURL: false))
        components.host = "localhost"
        let url = try #require(components.url).appendingPathComponent("get")
        var ipv4 = HTTPSessionConfiguration.ephemeral
        ipv4.socket.addressFamily = .ipv4
        let reply: JSON = try await HTTPSessionManager(configuration: ipv4).GET(url.absoluteString)
        #expect(reply["url"] != nil)
        var ipv6 = HTTPSessionConfiguration.ephemeral
        ipv6.socket.addressFamily = .ipv6
        await #expect(throws: CourierError.self) {
            let _: JSON = try await HTTPSessionManager(configuration: ipv6).GET(url.absoluteString)
        }
    }

    @Test func keepAliveAndTheUserTimeoutAreSetOnTheConnection() async throws {
        let api = try await faultManager {
            $0.socket.keepAlive = .init(idle: .seconds(42), interval: .seconds(7))
            $0.socket.userTimeout = .milliseconds(12_345)
        }
        let response = try await api.request(.get, "bytes", serializer: DataResponseSerializer())
        try withExtendedLifetime(api) {  // its pool holds the connection
            let socket = try #require(Self.socket(of: response.metrics))
            #expect(Self.option(socket, SOL_SOCKET, SO_KEEPALIVE) == 1)
            #expect(Self.option(socket, Int32(IPPROTO_TCP), TCP_KEEPIDLE) == 42)
            #expect(Self.option(socket, Int32(IPPROTO_TCP), TCP_KEEPINTVL) == 7)
            #expect(Self.option(socket, Int32(IPPROTO_TCP), TCP_USER_TIMEOUT) == 12_345)
        }

        // Without them, the kernel's defaults: no probes, no user timeout.
        let plainSession = try await faultManager()
        let plain = try await plainSession.request(.get, "bytes", serializer: DataResponseSerializer())
        try withExtendedLifetime(plainSession) {
            let other = try #require(Self.socket(of: plain.metrics))
            #expect(Self.option(other, SOL_SOCKET, SO_KEEPALIVE) == 0)
            #expect(Self.option(other, Int32(IPPROTO_TCP), TCP_USER_TIMEOUT) == 0)
        }
    }

    @Test func aRequestsUserTimeoutIsSetOnTheConnectionOpenedForIt() async throws {
        let api = try await faultManager()
        var options = RequestOptions()
        options.socket = SocketOptions()
        options.socket?.userTimeout = .seconds(3)
        options.socket?.source = .address("127.0.0.4")  // a connection of its own
        let response = try await api.request(.get, "bytes", options: options, serializer: DataResponseSerializer())
        try withExtendedLifetime(api) {
            let socket = try #require(Self.socket(of: response.metrics, from: "127.0.0.4"))
            #expect(Self.option(socket, Int32(IPPROTO_TCP), TCP_USER_TIMEOUT) == 3_000)
        }
    }

    @Test func aRequestsOwnSocketOptionsReplaceTheSessionsWhole() async throws {
        let api = try await faultManager { $0.socket.userTimeout = .milliseconds(12_345) }
        var options = RequestOptions()
        options.socket = SocketOptions()
        options.socket?.source = .address("127.0.0.6")  // a connection of its own, no user timeout
        let response = try await api.request(.get, "bytes", options: options, serializer: DataResponseSerializer())
        try withExtendedLifetime(api) {
            let socket = try #require(Self.socket(of: response.metrics, from: "127.0.0.6"))
            #expect(Self.option(socket, Int32(IPPROTO_TCP), TCP_USER_TIMEOUT) == 0)
        }
    }

    @Test func multipathIsAskedForWhereTheKernelHasIt() async throws {
        let api = try await faultManager { $0.socket.multipath = true }
        let response = try await api.request(.get, "bytes", serializer: DataResponseSerializer())
        #expect(response.status.code == 200)
        let enabled =
            (try? String(contentsOfFile: "/proc/sys/net/mptcp/enabled", encoding: .utf8))?
            .trimmingCharacters(in: .whitespacesAndNewlines) == "1"
        try withExtendedLifetime(api) {
            let socket = try #require(Self.socket(of: response.metrics))
            // IPPROTO_MPTCP is 262; a kernel without it gives a plain TCP socket (6).
            #expect(Self.option(socket, SOL_SOCKET, SO_PROTOCOL) == (enabled ? 262 : 6))
        }
    }

    // MARK: Sockets of this process

    /// The TCP socket of this process that carried a response, kept open in the session's pool:
    /// the one whose two ends are the metrics' (`localAddress` is the source the request sent
    /// from). Ports alone are not enough: the tests here run at once against one fault server,
    /// and two connections from different source addresses may have the same local port.
    private static func socket(of metrics: TransferMetrics, from localAddress: String = "127.0.0.1") -> Int32? {
        guard metrics.localPort > 0 else { return nil }
        let local = Endpoint(address: localAddress, port: metrics.localPort)
        let remote = Endpoint(address: metrics.remoteIP, port: metrics.remotePort)
        let descriptors = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd"))?
            .compactMap(Int32.init)
        for fd in descriptors ?? [] where option(fd, SOL_SOCKET, SO_TYPE) == Int32(SOCK_STREAM.rawValue) {
            if endpoint(fd, getsockname) == local, endpoint(fd, getpeername) == remote { return fd }
        }
        return nil
    }

    /// An IPv4 address and port.
    private struct Endpoint: Equatable {
        let address: String
        let port: Int
    }

    /// The IPv4 end `name` (getsockname or getpeername) gives for `fd`; nil for anything else.
    private static func endpoint(
        _ fd: Int32, _ name: (Int32, UnsafeMutablePointer<sockaddr>, UnsafeMutablePointer<socklen_t>) -> Int32
    ) -> Endpoint? {
        var address = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let named = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { name(fd, $0, &length) == 0 }
        }
        guard named, address.ss_family == sa_family_t(AF_INET) else { return nil }
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { pointer in
                var text = [CChar](repeating: 0, count: Int(INET_ADDRSTRLEN))
                var raw = pointer.pointee.sin_addr
                guard inet_ntop(AF_INET, &raw, &text, socklen_t(text.count)) != nil else { return nil }
                return Endpoint(
                    address: String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self),
                    port: Int(UInt16(bigEndian: pointer.pointee.sin_port)))
            }
        }
    }

    /// An integer socket option; nil when it cannot be read.
    private static func option(_ fd: Int32, _ level: Int32, _ name: Int32) -> Int32? {
        var value: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        return getsockopt(fd, level, name, &value, &length) == 0 ? value : nil
    }
}
