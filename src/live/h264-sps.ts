// The picture size an H.264 sequence parameter set declares (ITU-T H.264, 7.3.2.1.1), for a
// publisher whose onMetaData names no width or height: the AVC decoder configuration record
// (ISO/IEC 14496-15, 5.3.3.1) of its first video tag carries the SPS.

/** Reads the Exp-Golomb coded fields of an RBSP (H.264 9.1), most significant bit first. */
class BitReader {
  private bit = 0;
  private readonly bytes: Uint8Array;
  constructor(bytes: Uint8Array) {
    this.bytes = bytes;
  }

  u(n: number): number {
    let v = 0;
    for (let i = 0; i < n; i++) {
      const byte = this.bytes[this.bit >> 3];
      if (byte === undefined) throw new RangeError('SPS ends early');
      v = v * 2 + ((byte >> (7 - (this.bit & 7))) & 1);
      this.bit++;
    }
    return v;
  }

  ue(): number {
    let zeros = 0;
    while (this.u(1) === 0) {
      if (++zeros > 31) throw new RangeError('SPS Exp-Golomb code too long');
    }
    return 2 ** zeros - 1 + this.u(zeros);
  }

  se(): number {
    const k = this.ue();
    return k % 2 === 1 ? (k + 1) / 2 : -(k / 2);
  }
}

/** The NAL unit's payload without its emulation prevention bytes (00 00 03 -> 00 00, H.264 7.4.1). */
function rbsp(nal: Uint8Array): Uint8Array {
  const out: number[] = [];
  let zeros = 0;
  for (const b of nal) {
    if (zeros >= 2 && b === 3) {
      zeros = 0;
      continue;
    }
    zeros = b === 0 ? zeros + 1 : 0;
    out.push(b);
  }
  return Uint8Array.from(out);
}

// Profiles whose SPS carries chroma format, bit depths and scaling matrices (H.264 7.3.2.1.1).
const HIGH_PROFILES = new Set([100, 110, 122, 244, 44, 83, 86, 118, 128, 138, 139, 134, 135]);

function skipScalingLists(r: BitReader, count: number): void {
  for (let i = 0; i < count; i++) {
    if (r.u(1) === 0) continue;
    const size = i < 6 ? 16 : 64;
    let last = 8;
    let next = 8;
    for (let j = 0; j < size && next !== 0; j++) {
      next = (last + r.se() + 256) % 256;
      if (next !== 0) last = next;
    }
  }
}

/** Reads up to the picture order count fields, returning the chroma format (1 = 4:2:0 unless said). */
function readToFrameNum(r: BitReader): number {
  const profile = r.u(8);
  r.u(16); // constraint flags, level_idc
  r.ue(); // seq_parameter_set_id
  let chromaFormat = 1;
  if (HIGH_PROFILES.has(profile)) {
    chromaFormat = r.ue();
    if (chromaFormat === 3) r.u(1); // separate_colour_plane_flag
    r.ue(); // bit_depth_luma_minus8
    r.ue(); // bit_depth_chroma_minus8
    r.u(1); // qpprime_y_zero_transform_bypass_flag
    if (r.u(1) === 1) skipScalingLists(r, chromaFormat === 3 ? 12 : 8);
  }
  r.ue(); // log2_max_frame_num_minus4
  const pocType = r.ue();
  if (pocType === 0) r.ue();
  else if (pocType === 1) {
    r.u(1);
    r.se();
    r.se();
    const cycle = r.ue();
    for (let i = 0; i < cycle; i++) r.se();
  }
  return chromaFormat;
}

/** Width and height in pixels after cropping; undefined when the SPS cannot be read. */
export function spsPictureSize(nal: Uint8Array): { width: number; height: number } | undefined {
  try {
    const r = new BitReader(rbsp(nal.subarray(1))); // after the NAL header byte
    const chromaFormat = readToFrameNum(r);
    r.ue(); // max_num_ref_frames
    r.u(1); // gaps_in_frame_num_value_allowed_flag
    const widthMbs = r.ue() + 1;
    const heightUnits = r.ue() + 1;
    const frameMbsOnly = r.u(1);
    if (frameMbsOnly === 0) r.u(1); // mb_adaptive_frame_field_flag
    r.u(1); // direct_8x8_inference_flag
    const crop = r.u(1) === 1 ? [r.ue(), r.ue(), r.ue(), r.ue()] : [0, 0, 0, 0];
    // Crop units (H.264 table 6-1 and 7.4.2.1.1): 4:2:0 halves both axes, 4:2:2 the width only.
    const cropX = chromaFormat === 1 || chromaFormat === 2 ? 2 : 1;
    const cropY = (chromaFormat === 1 ? 2 : 1) * (2 - frameMbsOnly);
    const [left = 0, right = 0, top = 0, bottom = 0] = crop;
    return {
      width: widthMbs * 16 - cropX * (left + right),
      height: (2 - frameMbsOnly) * heightUnits * 16 - cropY * (top + bottom),
    };
  } catch {
    return undefined;
  }
}

/** The first SPS of an AVCDecoderConfigurationRecord (ISO/IEC 14496-15, 5.3.3.1.2). */
export function firstSpsOfAvcc(record: Uint8Array): Uint8Array | undefined {
  if (record.length < 8 || ((record[5] ?? 0) & 0x1f) === 0) return undefined;
  const length = ((record[6] ?? 0) << 8) | (record[7] ?? 0);
  if (8 + length > record.length) return undefined;
  return record.subarray(8, 8 + length);
}
