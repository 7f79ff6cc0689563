// What the test servers, worker processes and CLI runs encode with unless a test says
// otherwise: x264's fastest preset and no per-title analysis, which cost a test
// that only checks what comes out about half its encode time. The tests about presets,
// per-title ladders and quality (VMAF) set their own settings.

/** The settings, as startTestServer's `settings` and loadConfig's overrides take them. */
export const TEST_ENCODE_SETTINGS = { x264Preset: 'ultrafast', perTitle: false } as const;

/** The same, as the environment of a process that reads its config from there. */
export const TEST_ENCODE_ENV: Readonly<Record<string, string>> = {
  MEDIAPLANE_X264_PRESET: TEST_ENCODE_SETTINGS.x264Preset,
  MEDIAPLANE_PER_TITLE: String(TEST_ENCODE_SETTINGS.perTitle),
};
