import Foundation
import Testing

/// The real servers the tests talk to, started once per test process on free loopback ports
/// and stopped when it exits (each launcher watches our pid).
///
/// - httpbin under gunicorn, from the virtual environment `scripts/bootstrap` makes (`.venv`,
///   or `$COURIER_TEST_VENV`);
/// - the fault server in `Tests/Support/fault_server.py`;
/// - nginx, serving a directory of fixtures, with TLS and HTTP/2 on a second port.
actor TestServers {
    static let shared = TestServers()

    private var httpbin: Task<URL, any Error>?
    private var webSocket: Task<WebSocketPeers, any Error>?
    private var fault: Task<URL, any Error>?
    private var nginx: Task<NginxServer, any Error>?
    private var tls: Task<TLSServers, any Error>?
    private var http3: Task<HTTP3Server, any Error>?

    static let repositoryRoot: URL = {
        // .../Tests/CourierTests/Support/TestServers.swift -> repository root
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent()
    }()

    static var supportDirectory: URL { repositoryRoot.appendingPathComponent("Tests/Support") }

    static var virtualEnvironment: URL {
        if let path = ProcessInfo.processInfo.environment["COURIER_TEST_VENV"] {
            return URL(fileURLWithPath: path)
        }
        return repositoryRoot.appendingPathComponent(".venv")
    }

    /// httpbin's base URL, e.g. `http://127.0.0.1:41234/`.
    static func httpbin() async throws -> URL {
        try await shared.sharedHttpbin()
    }

    /// Python's `websockets` serving `Tests/Support/serve_websocket.py`: `ws://127.0.0.1:<port>/`.
    static func webSocket() async throws -> URL {
        try await shared.sharedWebSocket().ws
    }

    /// Every port of `Tests/Support/serve_websocket.py`: ws, the raw server of hostile frames,
    /// the CONNECT proxy, wss and wss with client certificates (the TLS servers' PKI).
    static func webSocketPeers() async throws -> WebSocketPeers {
        try await shared.sharedWebSocket()
    }

    /// The fault server's base URL.
    static func fault() async throws -> URL {
        try await shared.sharedFaultServer()
    }

    /// A fault server of the caller's own, for tests that count what reaches it.
    static func dedicatedFaultServer() async throws -> URL {
        try await startFaultServer()
    }

    /// A fault server of the caller's own listening on every address (`0.0.0.0`), so that
    /// 127.0.0.2 reaches it too; its URL names 127.0.0.1.
    static func faultServerOnEveryAddress() async throws -> URL {
        try await startFaultServer(bind: "0.0.0.0")
    }

    /// An httpbin of the caller's own, which the caller may stop (to prove that an answer came
    /// without the network).
    static func dedicatedHttpbin() async throws -> DedicatedServer {
        try await startHttpbin()
    }

    /// nginx: plain HTTP base URL, HTTPS base URL, the CA certificate, and the document root.
    static func nginx() async throws -> NginxServer {
        try await shared.sharedNginx()
    }

    /// nginx with the test PKI: a server per TLS case (see `Tests/Support/serve_tls.py`).
    static func tls() async throws -> TLSServers {
        try await shared.sharedTLS()
    }

    /// hypercorn speaking HTTP/3 over QUIC and HTTP/2 or 1.1 over TLS on one port number
    /// (`Tests/Support/serve_h3.py`), with a self-signed certificate of its own.
    static func http3() async throws -> HTTP3Server {
        try await shared.sharedHTTP3()
    }

    // Each shared server is started by its first caller; later callers await the same task
    // (the actor is reentrant across the await, so the task is stored before it).

    private func sharedHttpbin() async throws -> URL {
        if httpbin == nil { httpbin = Task { try await Self.startHttpbin().url } }
        return try await httpbin!.value
    }

    private func sharedWebSocket() async throws -> WebSocketPeers {
        if webSocket == nil {
            webSocket = Task {
                let tls = try await Self.tls()
                let python = Self.virtualEnvironment.appendingPathComponent("bin/python")
                let (_, fields) = try await Self.launch(
                    python, Self.supportDirectory.appendingPathComponent("serve_websocket.py").path, "--tls-info",
                    tls.infoFile.path)
                guard fields.count >= 6 else { throw TestServerError("serve_websocket.py: \(fields)") }
                return WebSocketPeers(
                    ws: URL(string: "ws://127.0.0.1:\(fields[0])/")!, raw: URL(string: "ws://127.0.0.1:\(fields[1])/")!,
                    proxy: URL(string: "http://127.0.0.1:\(fields[2])/")!,
                    wss: URL(string: "wss://localhost:\(fields[3])/")!,
                    wssClientCertificates: URL(string: "wss://localhost:\(fields[4])/")!,
                    deflate: URL(string: "ws://127.0.0.1:\(fields[5])/")!, tls: tls)
            }
        }
        return try await webSocket!.value
    }

    private func sharedFaultServer() async throws -> URL {
        if fault == nil { fault = Task { try await Self.startFaultServer() } }
        return try await fault!.value
    }

    private func sharedNginx() async throws -> NginxServer {
        if nginx == nil { nginx = Task { try await Self.startNginx() } }
        return try await nginx!.value
    }

    private func sharedTLS() async throws -> TLSServers {
        if tls == nil { tls = Task { try await Self.startTLS() } }
        return try await tls!.value
    }

    private func sharedHTTP3() async throws -> HTTP3Server {
        if http3 == nil {
            http3 = Task {
                let python = Self.virtualEnvironment.appendingPathComponent("bin/python")
                let (_, fields) = try await Self.launch(
                    python, Self.supportDirectory.appendingPathComponent("serve_h3.py").path)
                guard fields.count >= 2, let port = Int(fields[0]) else {
                    throw TestServerError("serve_h3.py: \(fields)")
                }
                let certificate = URL(fileURLWithPath: fields[1])
                let pin = try String(
                    contentsOf: certificate.deletingLastPathComponent().appendingPathComponent("pin.txt"),
                    encoding: .utf8)
                return HTTP3Server(
                    port: port, url: URL(string: "https://localhost:\(port)/")!, certificate: certificate,
                    pin: pin.trimmingCharacters(in: .whitespacesAndNewlines))
            }
        }
        return try await http3!.value
    }

    private static func startTLS() async throws -> TLSServers {
        let (_, fields) = try await launch(
            URL(fileURLWithPath: "/usr/bin/env"), "python3",
            supportDirectory.appendingPathComponent("serve_tls.py").path)
        return try TLSServers(info: URL(fileURLWithPath: fields[0]))
    }

    /// The SigV4 checking server (`Tests/Support/serve_sigv4.py`, botocore in the virtual
    /// environment), for the caller alone.
    static func sigV4Checker() async throws -> DedicatedServer {
        let python = virtualEnvironment.appendingPathComponent("bin/python")
        guard FileManager.default.isExecutableFile(atPath: python.path) else {
            throw TestServerError("No virtual environment at \(virtualEnvironment.path): run scripts/bootstrap")
        }
        let (process, fields) = try await launch(python, supportDirectory.appendingPathComponent("serve_sigv4.py").path)
        return DedicatedServer(url: URL(string: "http://127.0.0.1:\(fields[0])/")!, process: process)
    }

    private static func startHttpbin() async throws -> DedicatedServer {
        let python = virtualEnvironment.appendingPathComponent("bin/python")
        guard FileManager.default.isExecutableFile(atPath: python.path) else {
            throw TestServerError("No virtual environment at \(virtualEnvironment.path): run scripts/bootstrap")
        }
        let (process, fields) = try await launch(
            python, supportDirectory.appendingPathComponent("serve_httpbin.py").path, "--venv", virtualEnvironment.path)
        return DedicatedServer(url: URL(string: "http://127.0.0.1:\(fields[0])/")!, process: process)
    }

    private static func startFaultServer(bind: String = "127.0.0.1") async throws -> URL {
        let (_, fields) = try await launch(
            URL(fileURLWithPath: "/usr/bin/env"), "python3",
            supportDirectory.appendingPathComponent("fault_server.py").path, "--port", "0", "--bind", bind)
        return URL(string: "http://127.0.0.1:\(fields[0])/")!
    }

    private static func startNginx() async throws -> NginxServer {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("courier-nginx-\(getpid())")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        let (_, fields) = try await launch(
            URL(fileURLWithPath: "/usr/bin/env"), "python3",
            supportDirectory.appendingPathComponent("serve_nginx.py").path, "--root", root.path)
        return NginxServer(
            http: URL(string: "http://127.0.0.1:\(fields[0])/")!,
            https: URL(string: "https://localhost:\(fields[1])/")!,
            certificate: URL(fileURLWithPath: fields[2]), root: root)
    }

    /// Starts a launcher and waits for its `READY <fields...>` line. The launcher exits when
    /// this process does (it watches our pid). The wait (a blocking read, seconds for httpbin)
    /// runs on a thread of its own: Swift's cooperative pool has two threads on this machine,
    /// and a blocked one stalls every other test.
    private static func launch(
        _ executable: URL, _ arguments: String...
    ) async throws -> (DedicatedServer.Handle, [String]) {
        try await withCheckedThrowingContinuation { continuation in
            Thread.detachNewThread {
                continuation.resume(with: Result { try launchBlocking(executable, arguments) })
            }
        }
    }

    private static func launchBlocking(
        _ executable: URL, _ arguments: [String]
    ) throws -> (DedicatedServer.Handle, [String]) {
        let process = ChildProcess()
        process.executableURL = executable
        process.arguments = arguments + ["--parent-pid", String(getpid())]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.standardError
        try process.run()
        var line = Data()
        let handle = output.fileHandleForReading
        while true {
            let byte = handle.readData(ofLength: 1)
            if byte.isEmpty {
                throw TestServerError("\(arguments.joined(separator: " ")) exited before it was ready")
            }
            if byte.first == 0x0A { break }
            line.append(byte)
        }
        let text = String(decoding: line, as: UTF8.self)
        let fields = text.split(separator: " ").map(String.init)
        guard fields.first == "READY", fields.count >= 2 else {
            throw TestServerError("Unexpected line from \(arguments.joined(separator: " ")): \(text)")
        }
        return (DedicatedServer.Handle(process: process), Array(fields.dropFirst()))
    }
}

/// A server one test owns.
struct DedicatedServer: Sendable {
    /// A launcher process, asked only to terminate and whether it still runs (under its lock).
    struct Handle: @unchecked Sendable {
        let process: ChildProcess
    }

    let url: URL
    fileprivate let handle: Handle
    private var process: ChildProcess { handle.process }

    fileprivate init(url: URL, process: Handle) {
        self.url = url
        self.handle = process
    }

    /// Stops the server and waits until its launcher has exited (it stops the server first).
    /// Waits with `Task.sleep`, never blocking a thread of Swift's small cooperative pool.
    func stop() async {
        process.terminate()
        for _ in 0..<200 where process.isRunning {
            try? await Task.sleep(for: .milliseconds(50))
        }
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
    }
}

struct NginxServer: Sendable {
    var http: URL
    var https: URL
    var certificate: URL
    var root: URL
}

/// `serve_h3.py`: one port number for QUIC (UDP) and TLS (TCP), the certificate it serves
/// (its own CA), and that certificate's public-key pin (`sha256//...`).
struct HTTP3Server: Sendable {
    var port: Int
    var url: URL
    var certificate: URL
    var pin: String
}

struct TestServerError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// The servers of `serve_tls.py` and the PKI they use, from its `info.json`.
struct TLSServers: Sendable {
    struct Client: Decodable, Sendable {
        var cert: String
        var key: String
        var key_encrypted: String
        var key_password: String
        var p12: String
        var p12_password: String
    }

    private struct Info: Decodable {
        var ports: [String: Int]
        var socket: String
        var ca1: String
        var ca2: String
        var ca_dir: String
        var ca1_crl: String
        var fingerprints: [String: String]
        var client: Client
        var pins: [String: String]
        var access_log: String
    }

    private let info: Info
    /// Where the servers' ports and files are written (serve_tls.py's info.json).
    let infoFile: URL

    init(info file: URL) throws {
        info = try JSONDecoder().decode(Info.self, from: Data(contentsOf: file))
        infoFile = file
    }

    /// `https://localhost:<port>/` of the server `name` (`valid`, `expired`, ...); `http://`
    /// for the plain ones (`plain`, `h2c`).
    func url(_ name: String, scheme: String? = nil) -> URL {
        let plain = name == "plain" || name == "h2c"
        return URL(string: "\(scheme ?? (plain ? "http" : "https"))://localhost:\(port(name))/")!
    }

    func port(_ name: String) -> Int { info.ports[name]! }
    var socket: String { info.socket }
    var ca1: URL { URL(fileURLWithPath: info.ca1) }
    var ca2: URL { URL(fileURLWithPath: info.ca2) }
    var caDirectory: URL { URL(fileURLWithPath: info.ca_dir) }
    /// CA 1's revocation list: the `revoked` server's certificate is on it.
    var ca1RevocationList: URL { URL(fileURLWithPath: info.ca1_crl) }
    /// The SHA-256 of server certificate `name`'s DER, in lower-case hex.
    func fingerprint(_ name: String) -> String { info.fingerprints[name]! }
    var client: Client { info.client }
    func pin(_ name: String) -> String { info.pins[name]! }

    /// The lines of nginx's access log: `port "request" status connection requests protocol
    /// http2 reused` (reused: `r` for a resumed TLS session, `.` for a full handshake).
    func accessLog() throws -> [String] {
        try String(contentsOfFile: info.access_log, encoding: .utf8).split(separator: "\n").map(String.init)
    }

    /// The access log's lines that contain `text`, once there are `count` of them (nginx writes
    /// a line when it has finished with a request, which can be after the client has its
    /// response); what there is after five seconds otherwise.
    func accessLogLines(containing text: String, count: Int) async throws -> [String] {
        let deadline = ContinuousClock.now + .seconds(5)
        while true {
            let lines = try accessLog().filter { $0.contains(text) }
            if lines.count >= count || ContinuousClock.now >= deadline { return lines }
            try await Task.sleep(for: .milliseconds(20))
        }
    }
}

/// The WebSocket test peers (see `Tests/Support/serve_websocket.py`).
struct WebSocketPeers: Sendable {
    /// `ws://127.0.0.1:<port>/`: Python's `websockets`.
    var ws: URL
    /// A raw server that sends hostile frames (`/hostile/...`) and keeps a close unanswered
    /// (`/no-close-reply`); `GET /hostile/last-close?id=` over HTTP tells the close code it got.
    var raw: URL
    /// A CONNECT proxy that wants `courier:proxy-secret`; `GET /tunnels` counts its tunnels.
    var proxy: URL
    /// wss with the TLS servers' `valid` certificate (ca1), for localhost.
    var wss: URL
    /// wss that requires a client certificate (the TLS servers' client).
    var wssClientCertificates: URL
    /// ws with permessage-deflate when offered (the same paths as `ws`).
    var deflate: URL
    /// The PKI.
    var tls: TLSServers
}
