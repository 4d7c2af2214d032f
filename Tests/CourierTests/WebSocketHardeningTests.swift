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

    // MARK: - The handshake's request head

    @Test(arguments: [
        "/head/a%0D%0AX-Injected:%20yes",
        "/head/a%20b%3Fc?q=%0D%0AX-Injected:%20yes&r=%2F",
        "/head/%E2%9C%93/x%00y?%0A",
    ])
    func theRequestTargetGoesOutAsTheURLSpellsIt(target: String) async throws {
        let peers = try await TestServers.webSocketPeers()
        let url = "ws://\(peers.raw.host!):\(peers.raw.port!)\(target)"
        let socket = try await manager().webSocket(url)
        let head = try await receivedHead(socket)
        #expect(head.requestLine == "GET \(target) HTTP/1.1")
        #expect(!head.headerLines.contains { $0.lowercased().hasPrefix("x-injected") }, "\(head.headerLines)")
        #expect(socket.request.path == target)
    }

    @Test func theCommandLineSendsTheTargetAsTheURLSpellsIt() async throws {
        let peers = try await TestServers.webSocketPeers()
        let target = "/head/a%0D%0AX-Injected:%20yes"
        let run = try await CLITests.run(
            URL(fileURLWithPath: "/bin/sh"),
            ["-c", #""$0" "$1" </dev/null"#, CLITests.courierBinary.path, "ws://127.0.0.1:\(peers.raw.port!)\(target)"])
        #expect(run.status == 0, "\(run.stderr)")
        let head = try ReceivedHead(run.stdout)
        #expect(head.requestLine == "GET \(target) HTTP/1.1")
        #expect(!head.headerLines.contains { $0.lowercased().hasPrefix("x-injected") }, "\(head.headerLines)")
    }

    /// A host whose percent-encoding decodes to a line break fails with `invalidURL`, even
    /// with an address override for it. (libcurl 7.88 refuses such a URL too, so this passed
    /// before the handshake checked its host: `WebSocketHandshakeTests` pins that check down.)
    @Test func aHostThatDecodesToALineBreakIsRefusedBeforeAnythingIsSent() async throws {
        let peers = try await TestServers.webSocketPeers()
        let api = manager {
            $0.addressOverrides = [.resolve("a%0d%0ax-injected%3a%20yes", port: peers.raw.port!, to: "127.0.0.1")]
        }
        let error = await #expect(throws: CourierError.self) {
            try await api.webSocket("ws://a%0D%0AX-Injected%3A%20yes:\(peers.raw.port!)/head/x")
        }
        guard case .invalidURL = error else {
            Issue.record("expected invalidURL, got \(String(describing: error))")
            return
        }
    }

    /// A header an interceptor set with a control character (`HTTPField`'s lenient values keep
    /// them) is refused, and nothing reaches the server.
    @Test func aHeaderValueWithAControlCharacterIsRefused() async throws {
        struct Lenient: RequestInterceptor {
            func adapt(_ request: HTTPRequest, context: RequestContext) async throws -> HTTPRequest {
                var request = request
                request.headerFields.append(
                    HTTPField(name: HTTPField.Name("X-Control")!, lenientValue: Array("a\u{1}b".utf8)))
                return request
            }
        }
        let peers = try await TestServers.webSocketPeers()
        let api = manager(peers.raw) { $0.interceptors = [Lenient()] }
        let error = await #expect(throws: CourierError.self) { try await api.webSocket("head/x") }
        guard case .invalidHeader = error else {
            Issue.record("expected invalidHeader, got \(String(describing: error))")
            return
        }
    }

    // MARK: - A ping flood

    /// How many pings the flood of the raw server's `/ping-flood?id=NAME` has sent so far.
    private func pingsSent(_ peers: WebSocketPeers, id: String) async throws -> Int {
        Int(try await floodControl(peers, "sent", id: id)) ?? -1
    }

    private func floodControl(_ peers: WebSocketPeers, _ action: String, id: String) async throws -> String {
        let api = manager(URL(string: "http://\(peers.raw.host!):\(peers.raw.port!)/")!)
        return try await api.GET(
            "ping-flood/\(action)", parameters: ["id": .string(id)], serializer: StringResponseSerializer())
    }

    /// A server that sends pings as fast as it can and reads nothing: one pong waits at most
    /// (a later ping's payload replaces a waiting one's), the client stops reading until it
    /// is written (so the server's sends stall), and once the server reads again the last pong
    /// answers its last ping and the socket works on.
    // The limit catches a hang; it is wide because beside the rest of the suite the peers
    // alone can take a minute to start.
    @Test(.timeLimit(.minutes(10))) func aPingFloodFromAServerThatDoesNotReadStaysBounded() async throws {
        let peers = try await TestServers.webSocketPeers()
        let id = "flood-\(UUID())"
        let socket = try await manager(peers.raw).webSocket(
            "ping-flood", parameters: ["id": .string(id), "seconds": 60])
        let connection = try #require(socket.channel as? WebSocketConnection)
        // The flood stalls: its count stays the same for a second (the client read on for as
        // long as the server sent, before). It takes some 60,000 pings, answered until the
        // kernel's buffers are full of pongs: a few seconds on a loaded machine.
        var last = -1
        var stalledSince: ContinuousClock.Instant?
        let deadline = ContinuousClock.now + .seconds(30)
        while ContinuousClock.now < deadline {
            let sent = try await pingsSent(peers, id: id)
            if sent != last {
                (last, stalledSince) = (sent, .now)
            } else if let since = stalledSince, ContinuousClock.now - since >= .seconds(1) {
                break
            }
            try await Task.sleep(for: .milliseconds(200))
        }
        let peak = connection.peakUnwrittenBytes.load(ordering: .relaxed)
        guard let since = stalledSince, ContinuousClock.now - since >= .seconds(1), last > 0 else {
            Issue.record("the flood never stalled: \(last) pings sent; \(peak) bytes waited to be written at most")
            socket.cancel()
            return
        }
        // The handshake's head (under 300 bytes) was the most that ever waited: two pongs of
        // 131 bytes at most (one being written, one waiting) are less.
        #expect(peak <= 1024, "\(peak) bytes waited to be written")
        #expect(try await floodControl(peers, "stop", id: id) == "stopped")
        var iterator = socket.messages.makeAsyncIterator()
        #expect(try await iterator.next() == .text("flood over"))
        try await socket.send(.text("counts"))
        guard case .text(let text) = try await iterator.next() else {
            Issue.record("expected the counts")
            return
        }
        let counts = try JSON(parsing: Data(text.utf8))
        let pings = try #require(counts["pings"].intValue)
        let pongs = try #require(counts["pongs"].intValue)
        #expect(pongs >= 1 && pongs < pings, "\(pongs) pongs for \(pings) pings")
        #expect(counts["lastPong"].intValue == pings, "the last pong answers the last ping: \(counts)")
        #expect(connection.peakUnwrittenBytes.load(ordering: .relaxed) <= 1024)
        await socket.close()
        #expect(socket.closeCode == .normalClosure)
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

    // MARK: - The command line

    /// `courier` with `arguments`, standard input from `input` (a shell's `printf` format).
    private func courier(
        _ arguments: [String], input: String = "", environment: [String: String] = [:]
    ) async throws -> CLITests.Run {
        try await CLITests.run(
            URL(fileURLWithPath: "/bin/sh"),
            ["-c", #"format=$1; shift; printf "$format" | "$0" "$@""#, CLITests.courierBinary.path, input] + arguments,
            environment: environment)
    }

    @Test func verboseRedactsTheHandshakesSecrets() async throws {
        let peers = try await TestServers.webSocketPeers()
        let run = try await courier(
            [
                "-v", "--bearer", "s3cret-token", "ws://127.0.0.1:\(peers.ws.port!)/headers",
                "Cookie:session=s3cret-cookie",
            ])
        #expect(run.status == 0, "\(run.stderr)")
        #expect(run.stderr.contains("> Authorization: <redacted>"), "\(run.stderr)")
        #expect(run.stderr.contains("> Cookie: <redacted>"), "\(run.stderr)")
        #expect(run.stderr.contains("< Set-Cookie: <redacted>"), "\(run.stderr)")
        #expect(!run.stderr.contains("s3cret"), "\(run.stderr)")
        // The server had them.
        let headers = try JSON(parsing: Data(try #require(run.stdout.split(separator: "\n").first).utf8))
        #expect(headers["authorization"] == "Bearer s3cret-token")
        #expect(headers["cookie"] == "session=s3cret-cookie")
    }

    @Test func authGoesWithTheHandshake() async throws {
        let peers = try await TestServers.webSocketPeers()
        let run = try await courier(["--auth", "ada:pw", "ws://127.0.0.1:\(peers.ws.port!)/headers"])
        #expect(run.status == 0, "\(run.stderr)")
        let headers = try JSON(parsing: Data(try #require(run.stdout.split(separator: "\n").first).utf8))
        #expect(headers["authorization"] == .string("Basic \(Data("ada:pw".utf8).base64EncodedString())"))
    }

    /// A `--session`'s credential given for a ws URL goes with the later runs' handshakes: ws
    /// is http (and wss https) for the rule that keeps a credential given over https from
    /// going out in clear.
    @Test func aSessionsCredentialGoesWithTheLaterHandshakes() async throws {
        let peers = try await TestServers.webSocketPeers()
        let config = FileManager.default.temporaryDirectory.appendingPathComponent("cli-ws-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: config) }
        let url = "ws://127.0.0.1:\(peers.ws.port!)/headers"
        let basic = JSON.string("Basic \(Data("ada:pw".utf8).base64EncodedString())")
        for arguments in [["--session", "s", "--auth", "ada:pw", url], ["--session", "s", url]] {
            let run = try await courier(arguments, environment: ["XDG_CONFIG_HOME": config.path])
            #expect(run.status == 0, "\(run.stderr)")
            #expect(!run.stderr.contains("not sent"), "\(run.stderr)")
            let headers = try JSON(parsing: Data(try #require(run.stdout.split(separator: "\n").first).utf8))
            #expect(headers["authorization"] == basic, "\(arguments)")
        }
    }

    /// At the end of standard input the command reads on until the server has been quiet for
    /// `--wait` seconds (1 by default): a server that answers each line 300 ms later gets
    /// both answers printed. (5 seconds here: the peer serves the other tests too, and on a
    /// loaded machine an answer can come more than a second late.)
    @Test func theEndOfInputWaitsForTheRepliesOnTheirWay() async throws {
        let peers = try await TestServers.webSocketPeers()
        let url = "ws://127.0.0.1:\(peers.ws.port!)/slow-echo?delay=300"
        let run = try await courier(["--wait", "5", url], input: #"a\nb\n"#)
        #expect(run.status == 0, "\(run.stderr)")
        #expect(run.stdout == "a\nb\n")
        #expect(run.stderr.contains("the WebSocket closed 1000"), "\(run.stderr)")
        // --wait 0: closes at once, as the command did before the option.
        let hasty = try await courier(["--wait", "0", url], input: #"a\nb\n"#)
        #expect(hasty.status == 0, "\(hasty.stderr)")
        let help = try await CLITests.courier(["--help"])
        #expect(help.stdout.contains("--wait <wait>"), "\(help.stdout)")
        #expect(help.stdout.contains("(default: 1.0)"), "\(help.stdout)")
        #expect(try await CLITests.courier(["--wait", "-1", url]).status != 0)
    }
}
