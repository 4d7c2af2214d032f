import CourierCore
import CourierStorage
import CourierTransport
import Foundation

extension RequestPipeline {
    /// The credentials of a request: for the server (each for one origin: the request's own,
    /// and any a redirect led to that asked for one), and for the proxy it goes through.
    package struct CredentialPair: Sendable {
        package var server: [ScopedCredential] = []
        package var proxy: Credential?
    }

    /// What the credential store has for a request to `urlString` and for its proxy (`proxy`
    /// when the call has one of its own). An empty store (the common case) costs no URL parsing.
    func storedCredentials(for urlString: String, proxy: URL? = nil) -> CredentialPair {
        guard !credentials.isEmpty, let url = URL(string: urlString) else { return CredentialPair() }
        let server = ProtectionSpace(url: url).flatMap { space in
            credentials.credential(for: space).map { ScopedCredential($0, for: space) }
        }
        return CredentialPair(
            server: server.map { [$0] } ?? [],
            proxy: proxySpace(for: url, proxy).flatMap { credentials.credential(for: $0) })
    }

    /// The protection space of the proxy a request to `url` goes through: the call's own
    /// `proxy`, else the session's (or the environment's) for the URL's scheme; nil for none.
    func proxySpace(for url: URL, _ proxy: URL?) -> ProtectionSpace? {
        guard let proxy else { return proxies.protectionSpace(for: url) }
        var space = ProtectionSpace(url: proxy)
        space?.isProxy = true
        return space
    }

    /// After a 401 (or a 407 from the proxy) that no credential answered: takes the session's
    /// credential for that protection space or asks the hooks' `credential(for:)` once, keeps
    /// the answer when it is for the session, and returns the credentials for one more try. A
    /// request whose body cannot be sent again is not retried.
    ///
    /// The 401 may come from another origin than the request's, after a redirect: the new
    /// credential is then scoped to that origin, and the retry, which starts again at the
    /// request's own URL, sends it there only.
    func challengeRetry(
        after raw: RawResponse, used: CredentialPair, body: RequestBody?, hooks: any SessionHooks, proxy: URL? = nil
    ) async throws -> CredentialPair? {
        let status = raw.status.code
        guard body?.isReplayable ?? true else { return nil }
        let (schemes, realm): ([String], String?)
        var space: ProtectionSpace
        switch status {
        case 401 where used.server.credential(for: raw.url)?.sendsPreemptively == true:
            // A credential sent with Basic up front (the URL's user info, or one marked so) to
            // a server that asks for another scheme (Digest): the same credential once more,
            // answering the challenge instead (libcurl then picks the scheme the server named).
            // A server that asks for Basic again has refused the credential.
            let schemes = AuthenticateHeader.parse(raw.response.headerFields[values: .wwwAuthenticate]).schemes
            guard !schemes.isEmpty, !schemes.contains(where: { $0.lowercased() == "basic" }),
                var credential = used.server.credential(for: raw.url), let space = ProtectionSpace(url: raw.url)
            else { return nil }
            credential.sendsPreemptively = false
            var retry = used
            retry.server = [ScopedCredential(credential, for: space)] + used.server.filter { $0.origin != space.origin }
            return retry
        case 401 where used.server.credential(for: raw.url) == nil:
            (schemes, realm) = AuthenticateHeader.parse(raw.response.headerFields[values: .wwwAuthenticate])
            guard let server = ProtectionSpace(url: raw.url) else { return nil }
            space = server
        case 407 where used.proxy == nil:
            (schemes, realm) = AuthenticateHeader.parse(raw.response.headerFields[values: .proxyAuthenticate])
            guard let proxySpace = proxySpace(for: raw.url, proxy) else { return nil }
            space = proxySpace
        default:
            return nil
        }
        space.realm = realm
        let challenge = AuthenticationChallenge(
            protectionSpace: space, schemes: schemes, response: raw.response, url: raw.url)
        let credential: Credential
        if !space.isProxy, let stored = credentials.credential(for: space) {
            credential = stored
        } else {
            guard let answer = await hooks.credential(for: challenge) else { return nil }
            if answer.persistence == .forSession { credentials.set(answer, for: space) }
            credential = answer
        }
        var retry = used
        if space.isProxy {
            retry.proxy = credential
        } else {
            retry.server.append(ScopedCredential(credential, for: space))
        }
        return retry
    }
}
