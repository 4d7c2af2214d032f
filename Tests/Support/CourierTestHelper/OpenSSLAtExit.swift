// `CourierTestHelper openssl-at-exit URL STORAGE CA_FILE`: a program that makes a default session
// (cookies, a cache in STORAGE, CA_FILE trusted), GETs URL and returns from main while the session's engines may
// still be closing connections. OpenSSL frees its global state in an exit handler unless the
// first initialization in the process asked it not to; an engine thread inside OpenSSL then
// crashes. Whether the state was kept is checked from an exit handler registered before
// anything else, which therefore runs after OpenSSL's: it prints `openssl kept`,
// `openssl cleaned up` or `no openssl` (a libcurl built on another TLS library).
import Courier
import Foundation

/// `OPENSSL_init_crypto`'s option that does only the base initialization: after
/// `OPENSSL_cleanup` the call fails at once, and raises no error.
private let baseOnly: UInt64 = 0x0004_0000

/// Says whether OpenSSL still answers, from the last exit handler to run.
private func reportOpenSSLAtExit() {
    typealias InitCrypto = @convention(c) (UInt64, UnsafeRawPointer?) -> Int32
    let line: String
    if let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "OPENSSL_init_crypto") {
        let initCrypto = unsafeBitCast(symbol, to: InitCrypto.self)
        line = initCrypto(baseOnly, nil) == 1 ? "openssl kept\n" : "openssl cleaned up\n"
    } else {
        line = "no openssl\n"
    }
    // write(2): Foundation's handles may be gone this late.
    _ = line.utf8CString.withUnsafeBufferPointer { write(1, $0.baseAddress, $0.count - 1) }
}

func getThenReturnFromMain(_ url: URL, storage: URL, trusting authority: URL) async throws {
    // Before the session exists, so that it runs after any handler libcurl or OpenSSL registers.
    atexit { reportOpenSSLAtExit() }
    var configuration = HTTPSessionConfiguration.default
    configuration.storageDirectory = storage
    configuration.tls.certificateAuthorityFile = authority
    let api = HTTPSessionManager(configuration: configuration)
    let body: Data = try await api.GET(url.absoluteString, serializer: DataResponseSerializer())
    say("got \(body.count) bytes")
}
