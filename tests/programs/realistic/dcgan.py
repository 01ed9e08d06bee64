"""A small DCGAN on synthetic 16x16 images: the discriminator step sees fake.detach(), the generator step does not."""
import torch
import torch.nn as nn

torch.manual_seed(0)
nz, ngf, ndf = 8, 8, 8


class Generator(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.main = nn.Sequential(
            nn.ConvTranspose2d(nz, ngf * 2, 4, 1, 0, bias=False),
            nn.BatchNorm2d(ngf * 2),
            nn.ReLU(True),
            nn.ConvTranspose2d(ngf * 2, ngf, 4, 2, 1, bias=False),
            nn.BatchNorm2d(ngf),
            nn.ReLU(True),
            nn.ConvTranspose2d(ngf, 1, 4, 2, 1, bias=False),
            nn.Tanh(),
        )

    def forward(self, z):
        return self.main(z)


class Discriminator(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.main = nn.Sequential(
            nn.Conv2d(1, ndf, 4, 2, 1, bias=False),
            nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(ndf, ndf * 2, 4, 2, 1, bias=False),
            nn.BatchNorm2d(ndf * 2),
            nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(ndf * 2, 1, 4, 1, 0, bias=False),
        )

    def forward(self, x):
        return self.main(x).view(-1)


netG, netD = Generator(), Discriminator()
criterion = nn.BCEWithLogitsLoss()
optD = torch.optim.Adam(netD.parameters(), lr=2e-4, betas=(0.5, 0.999))
optG = torch.optim.Adam(netG.parameters(), lr=2e-4, betas=(0.5, 0.999))
real_images = torch.randn(24, 1, 16, 16).tanh()
for i in range(0, 24, 8):
    real = real_images[i:i + 8]
    ones, zeros = torch.ones(real.size(0)), torch.zeros(real.size(0))
    netD.zero_grad()
    err_real = criterion(netD(real), ones)
    fake = netG(torch.randn(real.size(0), nz, 1, 1))
    err_fake = criterion(netD(fake.detach()), zeros)  # the discriminator step must not train the generator
    (err_real + err_fake).backward()
    optD.step()
    netG.zero_grad()
    errG = criterion(netD(fake), ones)
    errG.backward()
    optG.step()
print(f"errD {(err_real + err_fake).item():.3f} errG {errG.item():.3f}")
