import { execFile } from 'node:child_process';
import { mkdtemp, writeFile, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

export interface TestCerts {
  dir: string;
  /** PEM file of the leaf's private key (PKCS#8). */
  keyPath: string;
  /** PEM file with the leaf first, then the root. */
  chainPath: string;
  rootPem: string;
  /** A self-signed leaf (its own CA): the C2PA rules reject it. */
  selfSignedChainPath: string;
  selfSignedKeyPath: string;
  /** A leaf signed by the root but with serverAuth as its only EKU: rejected too. */
  wrongEkuChainPath: string;
  wrongEkuKeyPath: string;
}

async function openssl(dir: string, args: string[]): Promise<void> {
  await run('openssl', args, { cwd: dir });
}

/**
 * Makes an ES256 root CA and leaves with openssl at test time (issue 5): the good leaf has
 * keyUsage digitalSignature and EKU emailProtection + documentSigning (1.3.6.1.5.5.7.3.36),
 * which the C2PA certificate profile accepts.
 */
export async function makeTestCerts(): Promise<TestCerts> {
  const dir = await mkdtemp(join(tmpdir(), 'mp-c2pa-certs-'));
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  await writeFile(
    join(dir, 'root.ext'),
    ['basicConstraints=critical,CA:TRUE', 'keyUsage=critical,keyCertSign,cRLSign', 'subjectKeyIdentifier=hash'].join(
      '\n',
    ),
  );
  await writeFile(
    join(dir, 'leaf.ext'),
    [
      'basicConstraints=critical,CA:FALSE',
      'keyUsage=critical,digitalSignature',
      'extendedKeyUsage=emailProtection,1.3.6.1.5.5.7.3.36',
      'subjectKeyIdentifier=hash',
      'authorityKeyIdentifier=keyid',
    ].join('\n'),
  );
  await writeFile(
    join(dir, 'bad.ext'),
    [
      'basicConstraints=critical,CA:FALSE',
      'keyUsage=critical,digitalSignature',
      'extendedKeyUsage=serverAuth',
      'authorityKeyIdentifier=keyid',
    ].join('\n'),
  );
  await openssl(dir, [
    'req',
    '-x509',
    ...ec,
    '-keyout',
    'root.key',
    '-out',
    'root.pem',
    '-days',
    '30',
    '-sha256',
    '-subj',
    '/CN=Mediaplane Test Root/O=Mediaplane Tests',
    '-extensions',
    'v3_ca',
    '-addext',
    'keyUsage=critical,keyCertSign,cRLSign',
  ]);
  for (const [name, ext] of [
    ['leaf', 'leaf.ext'],
    ['bad', 'bad.ext'],
  ] as const) {
    await openssl(dir, [
      'req',
      '-new',
      ...ec,
      '-keyout',
      `${name}.key.pem`,
      '-out',
      `${name}.csr`,
      '-subj',
      `/CN=Mediaplane ${name} signer/O=Mediaplane Tests`,
    ]);
    await openssl(dir, [
      'x509',
      '-req',
      '-in',
      `${name}.csr`,
      '-CA',
      'root.pem',
      '-CAkey',
      'root.key',
      '-CAcreateserial',
      '-out',
      `${name}.pem`,
      '-days',
      '10',
      '-sha256',
      '-extfile',
      ext,
    ]);
  }
  await openssl(dir, [
    'req',
    '-x509',
    ...ec,
    '-keyout',
    'self.key.pem',
    '-out',
    'self.pem',
    '-days',
    '10',
    '-sha256',
    '-subj',
    '/CN=Mediaplane self-signed/O=Mediaplane Tests',
    '-addext',
    'keyUsage=critical,digitalSignature',
    '-addext',
    'extendedKeyUsage=emailProtection',
  ]);
  const rootPem = await readFile(join(dir, 'root.pem'), 'utf8');
  const chain = async (leaf: string, out: string) => {
    await writeFile(join(dir, out), (await readFile(join(dir, leaf), 'utf8')) + rootPem);
    return join(dir, out);
  };
  return {
    dir,
    keyPath: join(dir, 'leaf.key.pem'),
    chainPath: await chain('leaf.pem', 'chain.pem'),
    rootPem,
    selfSignedChainPath: join(dir, 'self.pem'),
    selfSignedKeyPath: join(dir, 'self.key.pem'),
    wrongEkuChainPath: await chain('bad.pem', 'bad-chain.pem'),
    wrongEkuKeyPath: join(dir, 'bad.key.pem'),
  };
}
