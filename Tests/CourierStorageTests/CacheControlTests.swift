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

extension CacheControlTests {
    @Test func theStaleExtensionsAndRequestDirectivesTakeTheirSeconds() {
        let control = CacheControl(["stale-while-revalidate=30, stale-if-error=\"600\"", "min-fresh=5, max-stale=10"])
        #expect(control.staleWhileRevalidate == 30)
        #expect(control.staleIfError == 600)
        #expect(control.minFresh == 5)
        #expect(control.maxStale == 10)
        #expect(CacheControl(["max-stale"]).maxStale == .infinity)  // any staleness
        #expect(CacheControl(["max-age=5"]).maxStale == nil)
    }

    @Test func fieldNamesOfNoCacheAndPrivateAreOmittedNotTheWholeResponse() {
        let control = CacheControl([#"no-cache="Set-Cookie, X-Secret", private=X-Other"#])
        #expect(!control.noCache)
        #expect(control.omittedFields == ["set-cookie", "x-secret", "x-other"])
        // A comma inside quotes does not end the directive.
        let quoted = CacheControl([#"no-cache="a, max-age=5", max-age=60"#])
        #expect(quoted.maxAge == 60)
        #expect(CacheControl(["private"]).omittedFields.isEmpty)
    }

    @Test func theFirstMaxAgeWins() {
        #expect(CacheControl(["max-age=5", "max-age=600"]).maxAge == 5)
        #expect(CacheControl(["max-age=600, max-age=5"]).maxAge == 600)
    }

    @Test func mustUnderstandIsNoted() {
        let control = CacheControl(["no-store, must-understand"])
        #expect(control.noStore)
        #expect(control.mustUnderstand)
    }

    /// `Age` (RFC 9111 section 5.1): delta-seconds of the first value, anything else ignored.
    @Test func theAgeFieldIsReadAsDeltaSeconds() {
        #expect(CachedResponse.ageValue(["30"]) == 30)
        #expect(CachedResponse.ageValue([" 30 , 40"]) == 30)
        #expect(CachedResponse.ageValue(["30;ext", "99"]) == 30)
        #expect(CachedResponse.ageValue([]) == 0)
        for value in ["abc", "-7200", "7200.0", ""] {
            #expect(CachedResponse.ageValue([value]) == 0, "\(value)")
        }
        #expect(CachedResponse.ageValue(["99999999999999999999"]) == 2_147_483_648)
    }
}
