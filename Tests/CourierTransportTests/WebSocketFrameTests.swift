import CourierCore
import Foundation
import HTTPTypes
import Testing

@testable import CourierTransport

/// RFC 6455 framing: the frames a client writes (the RFC's own examples, byte for byte) and
/// what the reader makes of a server's frames, valid and not.
@Suite struct WebSocketFrameTests {
    private func read(_ bytes: [UInt8], limit: Int = 16 << 20) throws(WebSocketProtocolError) -> [WebSocketEvent] {
        var reader = WebSocketFrameReader(maximumMessageSize: limit)
        return try reader.feed(bytes)
    }

    private func closeCode(of bytes: [UInt8], limit: Int = 16 << 20) -> UInt16? {
        do {
            _ = try read(bytes, limit: limit)
            return nil
        } catch {
            return error.closeCode
        }
    }

    @Test func theRFCsExamplesAreWrittenAndRead() throws {
        let hello = Array("Hello".utf8)
        // Section 5.7: a single-frame masked text message, and the same unmasked.
        #expect(
            WebSocketFrameWriter.frame(.text, hello, mask: 0x37FA_213D)
                == [0x81, 0x85, 0x37, 0xFA, 0x21, 0x3D, 0x7F, 0x9F, 0x4D, 0x51, 0x58])
        #expect(WebSocketFrameWriter.frame(.text, hello, mask: nil) == [0x81, 0x05, 0x48, 0x65, 0x6C, 0x6C, 0x6F])
        #expect(try read([0x81, 0x05, 0x48, 0x65, 0x6C, 0x6C, 0x6F]) == [.text("Hello")])
        // A fragmented unmasked text message.
        #expect(try read([0x01, 0x03, 0x48, 0x65, 0x6C, 0x80, 0x02, 0x6C, 0x6F]) == [.text("Hello")])
        // Unmasked ping, 256 and 65,536 bytes of binary.
        #expect(try read([0x89, 0x05] + hello) == [.ping(hello)])
        let header256 = Array(
            WebSocketFrameWriter.frame(.binary, [UInt8](repeating: 7, count: 256), mask: nil).prefix(4))
        #expect(header256 == [0x82, 0x7E, 0x01, 0x00])
        let header64k = Array(
            WebSocketFrameWriter.frame(.binary, [UInt8](repeating: 7, count: 65536), mask: nil).prefix(10))
        #expect(header64k == [0x82, 0x7F, 0, 0, 0, 0, 0, 1, 0, 0])
    }

    @Test(arguments: [0, 125, 126, 65535, 65536, 1 << 20])
    func everyLengthEncodingRoundTrips(size: Int) throws {
        let payload = (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        #expect(try read(WebSocketFrameWriter.frame(.binary, payload, mask: nil)) == [.binary(payload)])
        let text = String(repeating: "é", count: size / 2)
        #expect(try read(WebSocketFrameWriter.frame(.text, Array(text.utf8), mask: nil)) == [.text(text)])
    }

    @Test func controlFramesMayComeBetweenFragmentsAndBytesMayArriveOneByOne() throws {
        let frames =
            WebSocketFrameWriter.frame(.text, Array("Hel".utf8), fin: false, mask: nil)
            + WebSocketFrameWriter.frame(.ping, [1, 2], mask: nil)
            + WebSocketFrameWriter.frame(.continuation, Array("lo".utf8), mask: nil)
            + WebSocketFrameWriter.frame(
                .close, WebSocketFrameWriter.closePayload(code: 1000, reason: "bye"), mask: nil)
        let whole = try read(frames)
        #expect(whole == [.ping([1, 2]), .text("Hello"), .close(code: 1000, reason: "bye")])
        var reader = WebSocketFrameReader()
        var pieces: [WebSocketEvent] = []
        for byte in frames { pieces += try reader.feed([byte]) }
        #expect(pieces == whole)
    }

    @Test func violationsNameTheirCloseCodes() {
        let hello = Array("Hello".utf8)
        #expect(closeCode(of: WebSocketFrameWriter.frame(.text, hello, mask: 1)) == 1002)  // masked by the server
        #expect(closeCode(of: [0x83, 0x00]) == 1002)  // reserved opcode
        #expect(closeCode(of: [0xC1, 0x00]) == 1002)  // RSV1 without an extension
        #expect(closeCode(of: [0x80, 0x00]) == 1002)  // continuation without a message
        #expect(closeCode(of: [0x01, 0x01, 0x41, 0x01, 0x01, 0x42]) == 1002)  // a new message inside one
        #expect(closeCode(of: [0x09, 0x00]) == 1002)  // a fragmented ping
        #expect(closeCode(of: [0x89, 0x7E, 0x00, 0x7E] + [UInt8](repeating: 0, count: 126)) == 1002)
        #expect(closeCode(of: [0x88, 0x01, 0x03]) == 1002)  // a close frame of one byte
        #expect(closeCode(of: [0x88, 0x02, 0x03, 0xED]) == 1002)  // close code 1005 may not be sent
        #expect(closeCode(of: [0x81, 0x02, 0xC3, 0x28]) == 1007)  // text that is not UTF-8
        #expect(closeCode(of: [0x88, 0x04, 0x03, 0xE8, 0xC3, 0x28]) == 1007)  // a reason that is not UTF-8
        #expect(
            closeCode(of: WebSocketFrameWriter.frame(.binary, [UInt8](repeating: 0, count: 11), mask: nil), limit: 10)
                == 1009)
        #expect(
            closeCode(
                of: WebSocketFrameWriter.frame(.binary, [UInt8](repeating: 0, count: 6), fin: false, mask: nil)
                    + WebSocketFrameWriter.frame(.continuation, [UInt8](repeating: 0, count: 6), mask: nil), limit: 10)
                == 1009)
        #expect(closeCode(of: [0x82, 0x7F, 0x80, 0, 0, 0, 0, 0, 0, 0]) == 1002)  // a 64-bit length with its top bit
    }

    @Test func aLongCloseReasonIsCutOnACharacterBoundary() throws {
        let payload = WebSocketFrameWriter.closePayload(code: 4000, reason: String(repeating: "€", count: 60))
        #expect(payload.count <= 125)
        #expect(
            try read(WebSocketFrameWriter.frame(.close, payload, mask: nil)) == [
                .close(code: 4000, reason: String(repeating: "€", count: 41))
            ])
    }
}

/// What the reader returns when a server breaks the protocol after whole messages.
@Suite struct WebSocketViolationTests {
    /// Five text messages, a ping, then a masked frame (a violation), then a message that is
    /// never read.
    static let bytes: [UInt8] =
        (1...5).flatMap { WebSocketFrameWriter.frame(.text, Array("message \($0)".utf8), mask: nil) }
        + WebSocketFrameWriter.frame(.ping, [1], mask: nil)
        + WebSocketFrameWriter.frame(.text, Array("hi".utf8), mask: 0x37FA_213D)
        + WebSocketFrameWriter.frame(.text, Array("after".utf8), mask: nil)

    static let expected: [WebSocketEvent] = (1...5).map { .text("message \($0)") } + [.ping([1])]

    @Test(arguments: [1, 2, 3, 7, 13, 64, 1 << 20])
    func theEventsBeforeAViolationAreReturnedWithItHoweverTheBytesAreCut(chunk: Int) {
        var reader = WebSocketFrameReader()
        var events: [WebSocketEvent] = []
        var violation: WebSocketProtocolError?
        for start in stride(from: 0, to: Self.bytes.count, by: chunk) where violation == nil {
            let read = reader.read(Self.bytes[start..<min(start + chunk, Self.bytes.count)])
            events += read.events
            violation = read.violation
        }
        #expect(events == Self.expected)
        #expect(violation?.closeCode == 1002)
        // Done after it: the violation again, and nothing else.
        let again = reader.read(WebSocketFrameWriter.frame(.text, Array("more".utf8), mask: nil))
        #expect(again.events.isEmpty && again.violation?.closeCode == 1002)
    }

    @Test func feedStillThrowsTheViolation() {
        var reader = WebSocketFrameReader()
        #expect(throws: WebSocketProtocolError.self) { try reader.feed(Self.bytes) }
    }
}

/// The opening handshake's pieces: the accept value (the RFC's example), the request head,
/// and the checks of the server's answer.
@Suite struct WebSocketHandshakeTests {
    @Test func theAcceptValueIsTheRFCsAndSHA1IsSHA1() {
        #expect(WebSocketHandshake.acceptValue(forKey: "dGhlIHNhbXBsZSBub25jZQ==") == "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=")
        func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }
        #expect(hex(SHA1.hash([])) == "da39a3ee5e6b4b0d3255bfef95601890afd80709")
        #expect(hex(SHA1.hash(Array("abc".utf8))) == "a9993e364706816aba3e25717850c26c9cd0d89d")
        let long = Array("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq".utf8)
        #expect(hex(SHA1.hash(long)) == "84983e441c3bd26ebaae4aa1f95129e5e54670f1")
        #expect(Data(base64Encoded: WebSocketHandshake.makeKey())?.count == 16)
        #expect(WebSocketHandshake.makeKey() != WebSocketHandshake.makeKey())
    }

    @Test func theRequestHeadAsksForTheUpgrade() throws {
        var fields = HTTPFields()
        fields[.authorization] = "Bearer t"
        fields[.connection] = "keep-alive"
        let head = try WebSocketHandshake.requestBytes(
            url: URL(string: "wss://chat.example.com:8443/rooms/1?since=5")!, key: "k==", protocols: ["v2", "v1"],
            fields: fields)
        #expect(
            String(decoding: head, as: UTF8.self)
                == "GET /rooms/1?since=5 HTTP/1.1\r\nHost: chat.example.com:8443\r\nUpgrade: websocket\r\n"
                + "Connection: Upgrade\r\nSec-WebSocket-Key: k==\r\nSec-WebSocket-Version: 13\r\n"
                + "Sec-WebSocket-Protocol: v2, v1\r\nAuthorization: Bearer t\r\n\r\n")
        let plain = try WebSocketHandshake.requestBytes(
            url: URL(string: "ws://[::1]:80")!, key: "k", protocols: [], fields: HTTPFields())
        #expect(String(decoding: plain, as: UTF8.self).hasPrefix("GET / HTTP/1.1\r\nHost: [::1]\r\n"))
    }

    @Test func theRequestTargetIsTheURLsOwnPercentEncodedText() throws {
        func requestLine(_ url: String) throws -> String {
            let head = try WebSocketHandshake.requestBytes(
                url: URL(string: url)!, key: "k", protocols: [], fields: HTTPFields())
            let text = String(decoding: head, as: UTF8.self)
            return String(text[..<text.range(of: "\r\n")!.lowerBound])
        }
        #expect(try requestLine("ws://h/a%0D%0AX-Injected:%20yes") == "GET /a%0D%0AX-Injected:%20yes HTTP/1.1")
        #expect(try requestLine("ws://h/a%20b%3Fc?q=%0A&r=%2F#frag") == "GET /a%20b%3Fc?q=%0A&r=%2F HTTP/1.1")
        #expect(try requestLine("wss://h:8443?only=query") == "GET /?only=query HTTP/1.1")
        #expect(WebSocketHandshake.percentEncodingInvisibleBytes("/a b\r\n✓") == "/a%20b%0D%0A%E2%9C%93")
        #expect(WebSocketHandshake.percentEncodingInvisibleBytes("/plain?x=%0A") == "/plain?x=%0A")
    }

    @Test func aHostOrAFieldThatWouldBreakTheHeadIsRefused() {
        #expect(throws: CourierError.self) {
            try WebSocketHandshake.requestBytes(
                url: URL(string: "ws://a%0D%0AX-Injected%3A%20yes/")!, key: "k", protocols: [], fields: HTTPFields())
        }
        var fields = HTTPFields()
        fields.append(HTTPField(name: HTTPField.Name("X-Control")!, lenientValue: Array("a\u{1}b".utf8)))
        let error = #expect(throws: CourierError.self) {
            try WebSocketHandshake.requestBytes(url: URL(string: "ws://h/")!, key: "k", protocols: [], fields: fields)
        }
        guard case .invalidHeader = error else {
            Issue.record("expected invalidHeader, got \(String(describing: error))")
            return
        }
        var tab = HTTPFields()
        tab[HTTPField.Name("X-Tab")!] = "a\tb"
        #expect(throws: Never.self) {
            try WebSocketHandshake.requestBytes(url: URL(string: "ws://h/")!, key: "k", protocols: [], fields: tab)
        }
    }

    @Test func theServersAnswerIsChecked() {
        let key = "dGhlIHNhbXBsZSBub25jZQ=="
        func answer(_ status: Int = 101, _ extra: [(String, String)] = []) -> HTTPResponse {
            var fields = HTTPFields()
            fields[.upgrade] = "WebSocket"
            fields[.connection] = "keep-alive, Upgrade"
            fields[HTTPField.Name("Sec-WebSocket-Accept")!] = "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
            for (name, value) in extra { fields[HTTPField.Name(name)!] = value }
            return HTTPResponse(status: .init(code: status), headerFields: fields)
        }
        #expect(WebSocketHandshake.check(answer(), key: key, protocols: []).failure == nil)
        #expect(WebSocketHandshake.check(answer(200), key: key, protocols: []).failure?.contains("200") == true)
        #expect(WebSocketHandshake.check(answer(), key: "other", protocols: []).failure != nil)
        let chosen = WebSocketHandshake.check(
            answer(101, [("Sec-WebSocket-Protocol", "v1")]), key: key, protocols: ["v2", "v1"])
        #expect(chosen.failure == nil && chosen.protocol == "v1")
        #expect(
            WebSocketHandshake.check(answer(101, [("Sec-WebSocket-Protocol", "v3")]), key: key, protocols: ["v1"])
                .failure != nil)
        #expect(
            WebSocketHandshake.check(
                answer(101, [("Sec-WebSocket-Extensions", "permessage-deflate")]), key: key, protocols: []
            ).failure != nil)
    }
}

/// permessage-deflate (RFC 7692): the negotiation, and messages compressed both ways.
@Suite struct WebSocketDeflateTests {
    @Test func theRFCsCompressedHelloIsRead() throws {
        // Section 7.2.3.1: "Hello" in one compressed frame.
        var reader = WebSocketFrameReader()
        reader.compression = WebSocketDeflater(WebSocketDeflateParameters())
        #expect(try reader.feed([0xC1, 0x07, 0xF2, 0x48, 0xCD, 0xC9, 0xC9, 0x07, 0x00]) == [.text("Hello")])
        // Section 7.2.3.2: the same, sent again with the window kept (a back-reference).
        #expect(try reader.feed([0xC1, 0x05, 0xF2, 0x00, 0x11, 0x00, 0x00]) == [.text("Hello")])
        // Section 7.2.3.1 in two fragments: RSV1 on the first only.
        #expect(try reader.feed([0x41, 0x03, 0xF2, 0x48, 0xCD]) == [])
        #expect(try reader.feed([0x80, 0x04, 0xC9, 0xC9, 0x07, 0x00]) == [.text("Hello")])
    }

    @Test func withoutTheExtensionRSV1IsAViolation() {
        var reader = WebSocketFrameReader()
        #expect(throws: WebSocketProtocolError.self) {
            try reader.feed([0xC1, 0x07, 0xF2, 0x48, 0xCD, 0xC9, 0xC9, 0x07, 0x00])
        }
        var compressed = WebSocketFrameReader()
        compressed.compression = WebSocketDeflater(WebSocketDeflateParameters())
        // Not on a control frame, nor on a continuation.
        #expect(throws: WebSocketProtocolError.self) { try compressed.feed([0xC9, 0x00]) }
    }

    @Test(arguments: [false, true])
    func whatIsCompressedReadsBack(noContextTakeover: Bool) throws {
        var parameters = WebSocketDeflateParameters()
        parameters.clientNoContextTakeover = noContextTakeover
        parameters.serverNoContextTakeover = noContextTakeover
        parameters.clientMaxWindowBits = 9
        let sender = try #require(WebSocketDeflater(parameters))
        let receiver = try #require(WebSocketDeflater(parameters))
        for message in [[UInt8](), Array("hello, hello, hello".utf8), (0..<200_000).map { UInt8($0 % 7) }] {
            for _ in 0..<3 {
                let compressed = message.withUnsafeBytes { sender.compress($0) }
                #expect(try receiver.decompress(compressed, limit: 1 << 20) == message)
                if message.count > 1000 { #expect(compressed.count < message.count / 10) }
            }
        }
    }

    @Test func aMessageThatInflatesPastTheLimitIsTooBig() throws {
        let deflater = try #require(WebSocketDeflater(WebSocketDeflateParameters()))
        let bomb = [UInt8](repeating: 0, count: 4 << 20).withUnsafeBytes { deflater.compress($0) }
        #expect(bomb.count < 10_000)
        let receiver = try #require(WebSocketDeflater(WebSocketDeflateParameters()))
        #expect(throws: WebSocketProtocolError(1009, "A message over the limit of 1048576 bytes once decompressed")) {
            try receiver.decompress(bomb, limit: 1 << 20)
        }
        let other = try #require(WebSocketDeflater(WebSocketDeflateParameters()))
        #expect(throws: WebSocketProtocolError.self) { try other.decompress([0xFF, 0xFF, 0xFF], limit: 1 << 20) }
    }

    @Test func theServersAnswerIsChecked() {
        func parse(_ value: String) -> WebSocketDeflateParameters? {
            try? WebSocketDeflateParameters.parse(value).get()
        }
        #expect(parse("permessage-deflate") == WebSocketDeflateParameters())
        let full = parse(
            "permessage-deflate; server_no_context_takeover; client_no_context_takeover; server_max_window_bits=10; client_max_window_bits=\"12\""
        )
        #expect(full?.serverNoContextTakeover == true && full?.clientNoContextTakeover == true)
        #expect(full?.serverMaxWindowBits == 10 && full?.clientMaxWindowBits == 12)
        for refused in [
            "x-webkit-deflate-frame", "permessage-deflate, permessage-deflate", "permessage-deflate; mystery",
            "permessage-deflate; server_max_window_bits=16", "permessage-deflate; server_max_window_bits",
            "permessage-deflate; client_max_window_bits=8", "permessage-deflate; server_no_context_takeover=1",
            "permessage-deflate; server_max_window_bits=10; server_max_window_bits=10",
            "permessage-deflate; server_max_window_bits=09",
        ] {
            #expect(parse(refused) == nil, "\(refused)")
        }
    }
}
