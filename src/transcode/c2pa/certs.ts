import { X509Certificate, type KeyObject } from 'node:crypto';

// The C2PA certificate profile (C2PA spec 2.x, section 14.5.1 "Certificate profile") checked
// here before the first task, so a bad certificate stops start-up with a message instead of
// failing every signed task later. The engine's own check runs after these (self-test in
// ../c2pa.ts); these give the clearer wording for the common mistakes.

const EKU = {
  anyExtendedKeyUsage: '2.5.29.37.0',
  emailProtection: '1.3.6.1.5.5.7.3.4',
  timeStamping: '1.3.6.1.5.5.7.3.8',
  ocspSigning: '1.3.6.1.5.5.7.3.9',
  documentSigning: '1.3.6.1.5.5.7.3.36',
  c2paClaimSigning: '1.3.6.1.4.1.62558.2.1',
} as const;
const SIGNING_EKUS: readonly string[] = [EKU.emailProtection, EKU.documentSigning, EKU.c2paClaimSigning];

export function parsePemChain(pem: string): X509Certificate[] {
  const blocks = pem.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? [];
  return blocks.map((b) => new X509Certificate(b));
}

/** Problems of `chain` (leaf first) under the C2PA rules; empty when it is fit to sign. */
export function checkChain(chain: X509Certificate[], key: KeyObject, now = new Date()): string[] {
  const leaf = chain[0];
  if (!leaf) return ['contains no PEM certificate'];
  const problems: string[] = [];
  if (!leaf.checkPrivateKey(key)) problems.push('the key does not belong to the first (leaf) certificate');
  if (leaf.ca)
    problems.push(
      'the leaf certificate is a CA certificate (basicConstraints CA:TRUE); C2PA needs an end-entity certificate',
    );
  if (leaf.checkIssued(leaf) && leaf.verify(leaf.publicKey))
    problems.push('the leaf certificate is self-signed; C2PA needs one issued by a CA');
  // Node reports the extended key usages here (an empty list or undefined when there is no EKU extension).
  const ekus = leaf.keyUsage ?? [];
  if (ekus.includes(EKU.anyExtendedKeyUsage))
    problems.push('the leaf certificate allows anyExtendedKeyUsage, which C2PA forbids');
  else if (!ekus.some((e) => SIGNING_EKUS.includes(e))) {
    problems.push(
      `the leaf certificate's extended key usage (${ekus.join(', ') || 'none'}) includes none of emailProtection, documentSigning (1.3.6.1.5.5.7.3.36) or C2PA claim signing`,
    );
  }
  chain.forEach((c, i) => {
    if (new Date(c.validFrom) > now || new Date(c.validTo) < now)
      problems.push(
        `certificate ${i + 1} (${c.subject.replace(/\n/g, ', ')}) is not valid now (${c.validFrom} to ${c.validTo})`,
      );
    const issuer = chain[i + 1];
    if (issuer && !(c.checkIssued(issuer) && c.verify(issuer.publicKey)))
      problems.push(
        `certificate ${i + 1} is not signed by certificate ${i + 2}: the chain must be leaf first, then each issuer`,
      );
  });
  return problems;
}
