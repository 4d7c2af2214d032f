import Testing

@testable import Courier

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
        #expect(CacheControl(["max-age=", "max-age"]).maxAge == nil)
        #expect(CacheControl(["max-age=soon"]).maxAge == nil)
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
