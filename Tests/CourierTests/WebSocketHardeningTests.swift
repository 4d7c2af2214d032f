@_spi(CourierInternals) import CourierCore
import Foundation
import HTTPTypes
import Testing

@testable import Courier
@testable import CourierEngine

/// WebSockets against peers that try to break the client: a URL that would write header
/// lines into the handshake, a server that floods pings and never reads the pongs, one that
/// breaks the protocol after whole messages; and the credentials a ws or wss URL is given.
@Suite struct WebSocketHardeningTests {
    private func manager(
        _ base: URL? = nil, _ configure: (inout HTTPSessionConfiguration) -> Void = { _ in }
    ) -> HTTPSessionManager {
        var configuration = HTTPSessionConfiguration.ephemeral
        configure(&configuration)
        return HTTPSessionManager(baseURL: base, configuration: configuration)
    }

    /// The raw server's report of the handshake it received (`/head/...`): the request line
    /// and the header lines, as they came.
    struct ReceivedHead {
        var requestLine: String
        var headerLines: [String]

        init(_ text: String) throws {
            let json = try JSON(parsing: Data(text.utf8))
            requestLine = try #require(json["requestLine"].stringValue)
            headerLines = try #require(json["headerLines"].arrayValue).compactMap(\.stringValue)
        }
    }

    private func receivedHead(_ socket: WebSocket) async throws -> ReceivedHead {
        var iterator = socket.messages.makeAsyncIterator()
        guard case .text(let text) = try await iterator.next() else {
            throw CourierError.invalidResponse(.init(message: "the server's report was not a text message"))
        }
        #expect(try await iterator.next() == nil)
        return try ReceivedHead(text)
    }

    // MARK: - Messages before a violation

    @Test func messagesThatArrivedWholeBeforeAViolationAreReadFirst() async throws {
        let peers = try await TestServers.webSocketPeers()
        let id = "before-violation-\(UUID())"
        let socket = try await manager(peers.raw).webSocket(
            "hostile/messages-then-masked", parameters: ["id": .string(id)])
        var received: [WebSocketMessage] = []
        let error = await #expect(throws: CourierError.self) {
            for try await message in socket.messages { received.append(message) }
        }
        #expect(received == (1...5).map { .text("message \($0)") })
        guard case .webSocketProtocolViolation(let context) = error else {
            Issue.record("expected webSocketProtocolViolation, got \(String(describing: error))")
            return
        }
        #expect(context.webSocketCloseCode == 1002)
        let raw = manager(URL(string: "http://\(peers.raw.host!):\(peers.raw.port!)/")!)
        let code = try await raw.GET(
            "hostile/last-close", parameters: ["id": .string(id), "wait": 6000], serializer: StringResponseSerializer())
        #expect(code == "1002")
    }

    // MARK: - Credentials for ws and wss

    @Test func aWebSocketsProtectionSpaceIsItsHandshakesOrigin() throws {
        let chat = try #require(ProtectionSpace(url: URL(string: "wss://Example.com/chat")!))
        #expect(chat.scheme == "https" && chat.host == "example.com" && chat.port == 443)
        #expect(chat == ProtectionSpace(url: URL(string: "https://example.com/")!))
        let plain = try #require(ProtectionSpace(url: URL(string: "ws://example.com/chat")!))
        #expect(plain.scheme == "http" && plain.port == 80)
        #expect(
            ProtectionSpace(url: URL(string: "ws://h:8080/")!) == ProtectionSpace(url: URL(string: "http://h:8080/")!))
        #expect(ProtectionSpace(scheme: "WSS", host: "h", port: 8443).scheme == "https")
        #expect(ProtectionSpace(scheme: "ws", host: "h", port: 80, realm: "r").description == #"http://h:80 "r""#)
    }

    @Test(arguments: [false, true])
    func aCredentialStoredForTheWebSocketURLGoesWithTheHandshake(secure: Bool) async throws {
        let peers = try await TestServers.webSocketPeers()
        let base = secure ? peers.wss : peers.ws
        let api = manager { $0.tls.certificateAuthorityFile = peers.tls.ca1 }
        let url = "\(secure ? "wss" : "ws")://\(base.host!):\(base.port!)/headers"
        api.credentials.set(
            Credential(user: "ada", password: "pw", sendsPreemptively: true),
            for: try #require(ProtectionSpace(url: URL(string: url)!)))
        let socket = try await api.webSocket(url)
        var iterator = socket.messages.makeAsyncIterator()
        guard case .text(let text) = try await iterator.next() else {
            Issue.record("expected the headers as text")
            return
        }
        let headers = try JSON(parsing: Data(text.utf8))
        #expect(headers["authorization"] == .string("Basic \(Data("ada:pw".utf8).base64EncodedString())"))
        await socket.close()
    }
}
