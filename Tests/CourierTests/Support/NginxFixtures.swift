import Foundation

/// Files in nginx's document root, made on demand.
enum NginxFixtures {
    /// A file of `bytes` pattern bytes (byte i is i % 251, as the fault server's); returns its
    /// path relative to the root.
    static func file(bytes: Int, in nginx: NginxServer) throws -> String {
        let name = "pattern-\(bytes).bin"
        let url = nginx.root.appendingPathComponent(name)
        if !FileManager.default.fileExists(atPath: url.path) {
            let pattern = (0..<251).map { UInt8($0) }
            var data = Data(capacity: bytes)
            while data.count < bytes { data.append(contentsOf: pattern.prefix(bytes - data.count)) }
            let temporary = nginx.root.appendingPathComponent(".\(name).\(UUID().uuidString)")
            try data.write(to: temporary)
            _ = rename(temporary.path, url.path)
        }
        return name
    }
}
