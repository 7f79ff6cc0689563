import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { promisify } from 'node:util';
import { cachedMedia } from './media-cache.ts';

// Generated content of the kinds a per-title ladder must tell apart (issue #31), drawn by
// ffmpeg's lavfi sources so tests and bench/per-title.ts need no media files. Each kind is
// made to cost what its real counterpart costs an encoder:
//   slide         a still slide deck (text on a flat background; the slides change every
//                 few seconds): a source of a few tens of kb/s, as slides and screencasts are
//                 (the gray-start bug of issue #31 lives here)
//   talking-head  a head and shoulders swaying slightly in front of a blurred, textured
//                 background, the mouth opening and closing, light sensor grain
//   high-motion   a fast pan across a detailed texture (a Mandelbrot still) with heavy
//                 grain: every pixel moves every frame, as in sport; hits any rung's cap
//   animation     flat colours and sharp edges in motion (testsrc2), as in cartoons

const run = promisify(execFile);

export const CONTENT_KINDS = ['slide', 'talking-head', 'high-motion', 'animation'] as const;
export type ContentKind = (typeof CONTENT_KINDS)[number];

export interface ContentOptions {
  kind: ContentKind;
  /** Default 1280x720. */
  width?: number;
  height?: number;
  /** Default 8. */
  seconds?: number;
  /** Frames per second, default 30. */
  fps?: number;
  /** The slide kind's number of slides over the duration (1: a static card). Default 2. */
  slides?: number;
  /** x264 CRF of the generated file, which tests and the bench use as the reference. Default 18. */
  crf?: number;
  /** A 440 Hz tone as AAC beside the picture. Default false. */
  audio?: boolean;
}

type Size = Required<Pick<ContentOptions, 'width' | 'height' | 'fps' | 'seconds' | 'slides'>>;

const FONT = '/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf';

/** The content as an H.264 MP4, made once per run (media-cache.ts, by its options); resolves with its path. */
export function makeContent(o: ContentOptions): Promise<string> {
  const size: Size = {
    width: o.width ?? 1280,
    height: o.height ?? 720,
    fps: o.fps ?? 30,
    seconds: o.seconds ?? 8,
    slides: o.kind === 'slide' ? (o.slides ?? 2) : 1,
  };
  const crf = o.crf ?? 18;
  const name = `content-g2-${o.kind}-${size.width}x${size.height}-${size.seconds}s-${size.fps}-s${size.slides}-crf${crf}-${o.audio ? 'a' : 'na'}.mp4`;
  return cachedMedia(name, async (tmp) => {
    const args = ['-v', 'error', '-y', '-nostdin'];
    if (o.audio) args.push('-f', 'lavfi', '-i', 'sine=frequency=440:sample_rate=48000');
    args.push(
      '-filter_complex',
      `${contentGraph(o.kind, size)}[v]`,
      '-map',
      '[v]',
      ...(o.audio ? ['-map', '0:a'] : []),
    );
    args.push('-t', String(size.seconds), '-c:v', 'libx264', '-preset', 'veryfast', '-crf', String(crf));
    // A keyframe every 2 s, as cameras and editors' exports write them (x264's default of 250
    // frames would make every seek into the file decode from its start).
    args.push('-g', String(size.fps * 2), '-pix_fmt', 'yuv420p', '-r', String(size.fps));
    if (o.audio) args.push('-c:a', 'aac', '-b:a', '96k');
    args.push(tmp);
    await run('ffmpeg', args, { maxBuffer: 4 << 20 });
  });
}

/** The lavfi filter graph drawing one kind (its last output is unlabelled: append a label). */
export function contentGraph(kind: ContentKind, s: Size): string {
  switch (kind) {
    case 'slide':
      return slideGraph(s);
    case 'talking-head':
      return talkingHeadGraph(s);
    case 'high-motion':
      return highMotionGraph(s);
    case 'animation':
      return `testsrc2=s=${s.width}x${s.height}:r=${s.fps}`;
  }
}

const even = (x: number): number => Math.max(2, Math.round(x / 2) * 2);
/** A still frame (drawn once, by a slow filter such as geq) repeated at the frame rate. */
const still = (fps: number): string => `trim=end_frame=1,loop=loop=-1:size=1,setpts=N/${fps}/TB`;

const SLIDES: readonly (readonly string[])[] = [
  ['Quarterly results', 'Revenue up 12 percent against last year', 'Three new regions opened', 'Costs flat'],
  ['Next steps', 'Hire two engineers for the video team', 'Ship the new player in March', 'Review in June'],
  ['Questions', 'Thank you for listening', 'Slides at example.com/deck', ''],
];

function slideGraph(s: Size): string {
  const font = existsSync(FONT) ? `fontfile=${FONT}` : 'font=Sans';
  const per = s.seconds / s.slides;
  const text = (t: string, o: { x: number; y: number; size: number; color: string; shown: string }) =>
    t
      ? `,drawtext=${font}:text='${t}':x=w*${o.x}:y=h*${o.y}:fontsize=h*${o.size}:fontcolor=${o.color}:enable='${o.shown}'`
      : '';
  let graph = `color=c=0xf4f1ea:s=${s.width}x${s.height}:r=${s.fps},drawbox=x=0:y=0:w=iw:h=ih*0.16:color=0x1e3a5f:t=fill`;
  for (let i = 0; i < s.slides; i++) {
    const lines = SLIDES[i % SLIDES.length] ?? [];
    const shown = i === s.slides - 1 ? `gte(t,${per * i})` : `between(t,${per * i},${per * (i + 1)}-0.001)`;
    graph += text(lines[0] ?? '', { x: 0.05, y: 0.045, size: 0.07, color: 'white', shown });
    lines.slice(1).forEach((line, k) => {
      graph += text(line, { x: 0.08, y: 0.3 + k * 0.12, size: 0.045, color: '0x222222', shown });
    });
  }
  return graph;
}

/** An ellipse mask on a coloured layer (geq runs once: the layer is a still). */
function ellipse(o: { color: string; w: number; h: number; fps: number; draw?: string; flatTop?: boolean }): string {
  const inside = o.flatTop
    ? 'pow((X-W/2)/(W/2),2)+pow(max(Y-H*0.4,0)/(H*0.6),2)'
    : 'pow((X-W/2)/(W/2),2)+pow((Y-H/2)/(H/2),2)';
  return `color=c=${o.color}:s=${o.w}x${o.h}:r=${o.fps}${o.draw ?? ''},format=yuva420p,geq=lum='p(X,Y)':cb='p(X,Y)':cr='p(X,Y)':a='if(lte(${inside},1),255,0)',${still(o.fps)}`;
}

function talkingHeadGraph(s: Size): string {
  const { width: W, height: H, fps } = s;
  const head = { w: even(W / 4), h: even((H * 5) / 8) };
  const box = (x: number, y: number, w: number, h: number, c: string) =>
    `,drawbox=x=iw*${x}:y=ih*${y}:w=iw*${w}:h=ih*${h}:color=${c}:t=fill`;
  const face =
    box(0.28, 0.32, 0.12, 0.035, '0x202020') +
    box(0.6, 0.32, 0.12, 0.035, '0x202020') +
    box(0.46, 0.42, 0.08, 0.14, '0xb08060');
  // The head sways by a few pixels, as a speaker does; the mouth follows it.
  const hx = `W*0.375+${(W / 160).toFixed(1)}*sin(t*1.1)`;
  const hy = `H*0.14+${(H / 180).toFixed(1)}*sin(t*1.7)`;
  return [
    `mandelbrot=s=${even(W / 2)}x${even(H / 2)}:r=${fps}:start_scale=0.6:start_x=-0.75:start_y=0.1:maxiter=400,${still(fps)},scale=${W}x${H},boxblur=6,eq=saturation=0.4:brightness=-0.05,format=yuv420p[bg]`,
    `${ellipse({ color: '0xc89878', ...head, fps, draw: face })}[head]`,
    `${ellipse({ color: '0x303848', w: even((W * 3) / 8), h: even((H * 3) / 8), fps, flatTop: true })}[body]`,
    `color=c=0x502828:s=${even(W / 16)}x${even(H / 36)}:r=${fps}[mouth]`,
    `[bg][body]overlay=x=W*0.3125+${(W / 210).toFixed(1)}*sin(t*1.3):y=H*0.68:shortest=1[b1]`,
    `[b1][head]overlay=x=${hx}:y=${hy}:shortest=1[b2]`,
    `[b2][mouth]overlay=x=${hx}+${head.w / 2}-w/2:y=${hy}+${(head.h * 0.72).toFixed(0)}:enable='lt(mod(t,0.5),0.25)':shortest=1,noise=alls=3:allf=t`,
  ].join(';');
}

function highMotionGraph(s: Size): string {
  const { width: W, height: H, fps } = s;
  // A pan across a still twice the frame's size: about a frame's width every 1.6 s.
  return [
    `mandelbrot=s=${W * 2}x${H * 2}:r=${fps}:start_scale=1.2:start_x=-0.745:start_y=0.186:maxiter=150,${still(fps)}`,
    `crop=w=${W}:h=${H}:x='(iw-ow)/2*(1+sin(t*1.9))':y='(ih-oh)/2*(1+cos(t*1.3))'`,
    'noise=alls=8:allf=t',
  ].join(',');
}
