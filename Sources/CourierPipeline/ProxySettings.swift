import CourierStorage
import CourierTransport
import Foundation

/// Which proxy a session's requests go through, for finding the proxy's protection space when
/// it asks for credentials (407). libcurl itself picks the proxy: the configuration's `proxy`
/// (`CURLOPT_PROXY`), else the environment variables it reads (`http_proxy`, `HTTPS_PROXY`,
/// `ALL_PROXY`, `NO_PROXY`; see `CURLOPT_PROXY(3)`). Read once, when the manager is made.
package struct ProxySettings: Sendable {
    private var http: URL?
    private var https: URL?

    package init(configured: URL?, environment: [String: String] = ProcessInfo.processInfo.environment) {
        if let configured {
            http = configured
            https = configured
            return
        }
        func variable(_ names: String...) -> URL? {
            for name in names {
                if let value = environment[name], !value.isEmpty {
                    // libcurl takes `host:port` without a scheme as an HTTP proxy.
                    return URL(string: value.contains("://") ? value : "http://" + value)
                }
            }
            return nil
        }
        // libcurl reads `http_proxy` in lower case only (see its man page), the others in both.
        let all = variable("ALL_PROXY", "all_proxy")
        http = variable("http_proxy") ?? all
        https = variable("HTTPS_PROXY", "https_proxy") ?? all
    }

    /// No request goes through a proxy: none is configured and the environment names none.
    package var isEmpty: Bool { http == nil && https == nil }

    /// The proxy's protection space for a request to `url`; nil when it goes direct.
    func protectionSpace(for url: URL) -> ProtectionSpace? {
        guard let proxy = url.scheme?.lowercased() == "https" ? https : http,
            var space = ProtectionSpace(url: proxy)
        else { return nil }
        space.isProxy = true
        return space
    }
}
