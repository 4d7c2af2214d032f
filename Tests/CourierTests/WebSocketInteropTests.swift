import Foundation
import HTTPTypes
import Testing

@testable import CourierTransport

/// Courier's WebSocket handshake and framing against another implementation (Python's
/// `websockets`, Tests/Support/serve_websocket.py), over a plain blocking socket: the
/// connection through libcurl is still to come, so this checks that what Courier writes and
/// reads is what a real server speaks.
@Suite struct WebSocketInteropTests {
    /// A blocking TCP connection to loopback, on a thread of its own (not the cooperative pool).
    final class Connection: @unchecked Sendable {
        private let socket: Int32
        private var reader = WebSocketFrameReader()
        private var pending: [UInt8] = []

        init(port: Int) throws {
            socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = in_port_t(UInt16(port).bigEndian)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            var timeout = timeval(tv_sec: 30, tv_usec: 0)
            setsockopt(socket, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            let connected = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    connect(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
            guard connected == 0 else { throw POSIXError(.ECONNREFUSED) }
        }

        deinit { close(socket) }

        func write(_ bytes: [UInt8]) {
            var sent = 0
            while sent < bytes.count {
                let count = bytes[sent...].withUnsafeBytes { send(socket, $0.baseAddress, $0.count, 0) }
                guard count > 0 else { return }
                sent += count
            }
        }

        private func readSome() -> [UInt8] {
            var buffer = [UInt8](repeating: 0, count: 65536)
            let count = buffer.withUnsafeMutableBytes { recv(socket, $0.baseAddress, $0.count, 0) }
            return count > 0 ? Array(buffer[0..<count]) : []
        }

        /// The handshake: the request, then the answer's head parsed.
        func open(path: String, port: Int, protocols: [String]) -> (failure: String?, protocol: String?) {
            let key = WebSocketHandshake.makeKey()
            let head: [UInt8]
            do {
                head = try WebSocketHandshake.requestBytes(
                    url: URL(string: "ws://127.0.0.1:\(port)\(path)")!, key: key, protocols: protocols,
                    fields: HTTPFields())
            } catch {
                return ("the request head: \(error)", nil)
            }
            write(head)
            while !pending.containsHeadEnd {
                let more = readSome()
                if more.isEmpty { return ("the connection closed during the handshake", nil) }
                pending += more
            }
            let end = pending.headEnd
            let lines = String(decoding: pending[0..<end], as: UTF8.self).components(separatedBy: "\r\n")
            pending.removeFirst(end + 4)
            let status = Int(lines[0].split(separator: " ")[1]) ?? 0
            var fields = HTTPFields()
            for line in lines.dropFirst() {
                guard let colon = line.firstIndex(of: ":"), let name = HTTPField.Name(String(line[..<colon])) else {
                    continue
                }
                fields.append(
                    HTTPField(name: name, value: line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces))
                )
            }
            let answer = WebSocketHandshake.check(
                HTTPResponse(status: .init(code: status), headerFields: fields), key: key, protocols: protocols)
            return (answer.failure, answer.protocol)
        }

        /// Reads until `count` events have come (or the connection ends).
        func events(_ count: Int) throws -> [WebSocketEvent] {
            var events = try reader.feed(pending)
            pending = []
            while events.count < count {
                let more = readSome()
                if more.isEmpty { break }
                events += try reader.feed(more)
            }
            return events
        }
    }

    private static func onThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            Thread.detachNewThread { continuation.resume(with: Result { try body() }) }
        }
    }

    @Test func messagesOfEveryLengthAreEchoedAndASubprotocolIsChosen() async throws {
        let port = try await TestServers.webSocket().port!
        try await Self.onThread {
            let connection = try Connection(port: port)
            let opened = connection.open(path: "/echo", port: port, protocols: ["v3", "v2"])
            #expect(opened.failure == nil)
            #expect(opened.protocol == "v2")
            for size in [0, 125, 126, 65535, 65536, 1 << 20] {
                let binary = (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 7) }
                connection.write(WebSocketFrameWriter.frame(.binary, binary, mask: UInt32.random(in: 0...UInt32.max)))
                #expect(try connection.events(1) == [.binary(binary)], "binary of \(size) bytes")
                let text = String(repeating: "ü", count: size / 2)
                connection.write(
                    WebSocketFrameWriter.frame(.text, Array(text.utf8), mask: UInt32.random(in: 0...UInt32.max)))
                #expect(try connection.events(1) == [.text(text)], "text of \(size) bytes")
            }
            // A message in fragments with a ping between them: the pong first, then the echo.
            connection.write(WebSocketFrameWriter.frame(.text, Array("Hel".utf8), fin: false, mask: 1))
            connection.write(WebSocketFrameWriter.frame(.ping, [9], mask: 2))
            connection.write(WebSocketFrameWriter.frame(.continuation, Array("lo".utf8), mask: 3))
            #expect(try connection.events(2) == [.pong([9]), .text("Hello")])
            // The close handshake: the server answers with the same code.
            connection.write(
                WebSocketFrameWriter.frame(
                    .close, WebSocketFrameWriter.closePayload(code: 1000, reason: "done"), mask: 4))
            #expect(try connection.events(1) == [.close(code: 1000, reason: "done")])
        }
    }

    @Test func theServersFragmentsPingAndCloseAreRead() async throws {
        let port = try await TestServers.webSocket().port!
        try await Self.onThread {
            let connection = try Connection(port: port)
            #expect(connection.open(path: "/fragments", port: port, protocols: []).failure == nil)
            #expect(
                try connection.events(3) == [
                    .text("Hello, fragments"), .ping(Array("p".utf8)), .close(code: 4001, reason: "done"),
                ])
            let closing = try Connection(port: port)
            #expect(closing.open(path: "/close", port: port, protocols: ["v1"]).protocol == "v1")
            #expect(try closing.events(1) == [.close(code: 4000, reason: "bye")])
        }
    }
}

extension [UInt8] {
    /// Where the blank line that ends a head starts.
    fileprivate var headEnd: Int {
        guard count >= 4 else { return -1 }
        for index in 0...(count - 4)
        where self[index] == 13 && self[index + 1] == 10 && self[index + 2] == 13 && self[index + 3] == 10 {
            return index
        }
        return -1
    }

    fileprivate var containsHeadEnd: Bool { headEnd >= 0 }
}
