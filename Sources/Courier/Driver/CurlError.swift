import CCurlShim
import Foundation

extension CourierError {
    /// Maps a libcurl result code to the `CourierError` case a caller can act on.
    ///
    /// `detail` is libcurl's own message from `CURLOPT_ERRORBUFFER` when it wrote one
    /// (libcurl-errors(3) lists the codes).
    static func fromCurl(_ code: CURLcode, detail: String, context: Context) -> CourierError {
        var context = context
        context.curlCode = Int(code.rawValue)
        let text = detail.isEmpty ? String(cString: curl_easy_strerror(code)) : detail
        switch code {
        case CURLE_UNSUPPORTED_PROTOCOL:
            context.message = "Unsupported scheme: \(text)"
            return .unsupportedScheme(context)
        case CURLE_URL_MALFORMAT:
            context.message = "Malformed URL: \(text)"
            return .invalidURL(context)
        case CURLE_COULDNT_RESOLVE_HOST, CURLE_COULDNT_RESOLVE_PROXY:
            context.message = "Cannot resolve host: \(text)"
            return .cannotResolveHost(context)
        case CURLE_COULDNT_CONNECT:
            context.message = "Cannot connect: \(text)"
            return .cannotConnect(context)
        case CURLE_OPERATION_TIMEDOUT:
            context.message = "Timed out: \(text)"
            return .timedOut(context)
        case CURLE_PARTIAL_FILE, CURLE_GOT_NOTHING, CURLE_RECV_ERROR, CURLE_SEND_ERROR,
            CURLE_HTTP2_STREAM, CURLE_HTTP2:
            context.message = "Connection lost: \(text)"
            return .connectionLost(context)
        case CURLE_SSL_CONNECT_ERROR, CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_CERTPROBLEM,
            CURLE_SSL_CIPHER, CURLE_SSL_CACERT_BADFILE, CURLE_SSL_PINNEDPUBKEYNOTMATCH,
            CURLE_SSL_INVALIDCERTSTATUS, CURLE_SSL_ENGINE_NOTFOUND, CURLE_SSL_ENGINE_SETFAILED,
            CURLE_SSL_SHUTDOWN_FAILED, CURLE_SSL_CRL_BADFILE, CURLE_SSL_ISSUER_ERROR,
            CURLE_SSL_CLIENTCERT, CURLE_USE_SSL_FAILED:
            context.message = "TLS failure: \(text)"
            return .tls(context)
        case CURLE_TOO_MANY_REDIRECTS:
            context.message = "Too many redirects: \(text)"
            return .tooManyRedirects(context)
        case CURLE_FILESIZE_EXCEEDED:
            context.message = "Response too large: \(text)"
            return .responseTooLarge(context)
        case CURLE_WEIRD_SERVER_REPLY, CURLE_BAD_CONTENT_ENCODING:
            context.message = "Invalid response: \(text)"
            return .invalidResponse(context)
        case CURLE_WRITE_ERROR, CURLE_READ_ERROR:
            context.message = "File system: \(text)"
            return .fileSystem(context)
        default:
            context.message = "Transfer failed: \(text)"
            return .transport(context)
        }
    }
}
