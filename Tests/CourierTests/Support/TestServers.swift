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

    private var httpbinPort: Int?
    private var faultPort: Int?
    private var nginx: NginxServer?
    private var processes: [Process] = []

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
        try await shared.startHttpbin()
    }

    /// The fault server's base URL.
    static func fault() async throws -> URL {
        try await shared.startFaultServer()
    }

    /// A fault server of the caller's own, for tests that count what reaches it.
    static func dedicatedFaultServer() async throws -> URL {
        try await shared.startDedicatedFaultServer()
    }

    /// nginx: plain HTTP base URL, HTTPS base URL, the CA certificate, and the document root.
    static func nginx() async throws -> NginxServer {
        try await shared.startNginx()
    }

    private func startHttpbin() throws -> URL {
        if let httpbinPort { return URL(string: "http://127.0.0.1:\(httpbinPort)/")! }
        let python = Self.virtualEnvironment.appendingPathComponent("bin/python")
        guard FileManager.default.isExecutableFile(atPath: python.path) else {
            throw TestServerError("No virtual environment at \(Self.virtualEnvironment.path): run scripts/bootstrap")
        }
        let fields = try launch(
            python, Self.supportDirectory.appendingPathComponent("serve_httpbin.py").path,
            "--venv", Self.virtualEnvironment.path)
        httpbinPort = Int(fields[0])
        return URL(string: "http://127.0.0.1:\(fields[0])/")!
    }

    private func startFaultServer() throws -> URL {
        if let faultPort { return URL(string: "http://127.0.0.1:\(faultPort)/")! }
        let fields = try launch(
            URL(fileURLWithPath: "/usr/bin/env"), "python3",
            Self.supportDirectory.appendingPathComponent("fault_server.py").path, "--port", "0")
        faultPort = Int(fields[0])
        return URL(string: "http://127.0.0.1:\(fields[0])/")!
    }

    private func startDedicatedFaultServer() throws -> URL {
        let fields = try launch(
            URL(fileURLWithPath: "/usr/bin/env"), "python3",
            Self.supportDirectory.appendingPathComponent("fault_server.py").path, "--port", "0")
        return URL(string: "http://127.0.0.1:\(fields[0])/")!
    }

    private func startNginx() throws -> NginxServer {
        if let nginx { return nginx }
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("courier-nginx-\(getpid())")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        let fields = try launch(
            URL(fileURLWithPath: "/usr/bin/env"), "python3",
            Self.supportDirectory.appendingPathComponent("serve_nginx.py").path, "--root", root.path)
        let server = NginxServer(
            http: URL(string: "http://127.0.0.1:\(fields[0])/")!,
            https: URL(string: "https://localhost:\(fields[1])/")!,
            certificate: URL(fileURLWithPath: fields[2]), root: root)
        nginx = server
        return server
    }

    /// Starts a launcher and waits for its `READY <fields...>` line.
    private func launch(_ executable: URL, _ arguments: String...) throws -> [String] {
        let process = Process()
        process.executableURL = executable
        process.arguments = arguments + ["--parent-pid", String(getpid())]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.standardError
        try process.run()
        processes.append(process)
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
        return Array(fields.dropFirst())
    }
}

struct NginxServer: Sendable {
    var http: URL
    var https: URL
    var certificate: URL
    var root: URL
}

struct TestServerError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
