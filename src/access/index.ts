// Private playback (issue #28): signing keys and the playback JWTs they sign.
export { SigningKeyStore, type SigningKey, type SigningKeyPage } from './signing-keys.ts';
export { CLOCK_SKEW_MS, verifyPlaybackJwt, type JwtKeyLookup, type PlaybackJwtCheck } from './jwt.ts';
