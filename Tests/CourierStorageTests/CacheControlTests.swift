import CourierStorage
import Testing

/// `Cache-Control` parsing (RFC 9111 section 5.2): every response of a session with a cache
/// goes through it, so it reads bytes; these pin down what it must still understand.
struct CacheControlTests {
    @Test func directiveNamesAreCaseInsensitiveAndSpacesAroundThemDoNotMatter() {
        let control = CacheControl(["No-Store ,\tMUST-REVALIDATE", " Public,no-cache "])
        #expect(control.noStore)
        #expect(control.mustRevalidate)
        #expect(control.isPublic)
        #expect(control.noCache)
        #expect(control.maxAge == nil)
    }

    @Test func maxAgeTakesItsNumberQuotedOrNot() {
        #expect(CacheControl(["max-age=60"]).maxAge == 60)
        #expect(CacheControl(["private, Max-Age = \"120\""]).maxAge == 120)
    }

    /// RFC 9111: max-age is delta-seconds. A malformed one makes the response stale (0) rather
    /// than fresh for a time nobody meant; one too large to hold is 2^31.
    @Test func aMalformedMaxAgeIsStaleAndAHugeOneIsCapped() {
        #expect(CacheControl(["max-age="]).maxAge == 0)
        #expect(CacheControl(["max-age"]).maxAge == 0)
        #expect(CacheControl(["max-age=soon"]).maxAge == 0)
        #expect(CacheControl(["MAX-AGE=-5, s-maxage=3"]).maxAge == 0)  // a fuzzer's finding
        #expect(CacheControl(["max-age=1e3"]).maxAge == 0)
        #expect(CacheControl(["max-age=inf"]).maxAge == 0)
        #expect(CacheControl(["max-age=99999999999999999999999"]).maxAge == 2_147_483_648)
    }

    @Test func namesThatOnlyLookAlikeDoNotCount() {
        let control = CacheControl(["no-stored, xno-cache, no\rstore, public-ish, s-maxage=5, proxy-revalidate"])
        #expect(!control.noStore)
        #expect(!control.noCache)
        #expect(control.isPublic)  // s-maxage
        #expect(control.mustRevalidate)  // proxy-revalidate
        #expect(CacheControl([]).noStore == false)
        #expect(CacheControl([",,, ,"]).noStore == false)
    }
}
