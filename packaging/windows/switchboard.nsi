; Switchboard's Windows installer: per user (no administrator rights),
; into %LOCALAPPDATA%\Programs\Switchboard, with a Start-menu entry and an
; uninstaller registered in Apps & features (HKCU). `make package-windows`
; builds it with Debian's makensis:
;
;   makensis -DVERSION=0.1.0 -DSRC=dist/windows -DOUT=dist/switchboard-0.1.0-setup.exe switchboard.nsi
;
; Silent use: setup.exe /S [/D=C:\path]; uninstall.exe /S.

; The app is 64-bit only, and so is the installer (it also runs under a
; 64-bit-only Wine).
Target amd64-unicode
SetCompressor /SOLID lzma
RequestExecutionLevel user

!ifndef VERSION
  !error "VERSION is not defined (-DVERSION=...)"
!endif
!ifndef SRC
  !error "SRC is not defined (-DSRC=directory with the .exe files)"
!endif
!ifndef OUT
  !define OUT "switchboard-${VERSION}-setup.exe"
!endif

!define UNINSTKEY "Software\Microsoft\Windows\CurrentVersion\Uninstall\Switchboard"
!define RUNKEY "Software\Microsoft\Windows\CurrentVersion\Run"

Name "Switchboard ${VERSION}"
OutFile "${OUT}"
InstallDir "$LOCALAPPDATA\Programs\Switchboard"
InstallDirRegKey HKCU "${UNINSTKEY}" "InstallLocation"
Icon "${SRC}\switchboard.ico"
UninstallIcon "${SRC}\switchboard.ico"
VIProductVersion "${VERSION}.0"
VIAddVersionKey "ProductName" "Switchboard"
VIAddVersionKey "FileDescription" "Switchboard installer"
VIAddVersionKey "FileVersion" "${VERSION}"
VIAddVersionKey "ProductVersion" "${VERSION}"
VIAddVersionKey "LegalCopyright" "Copyright (c) 2026 The Switchboard authors. MIT License."

Page license
Page directory
Page instfiles
UninstPage uninstConfirm
UninstPage instfiles
LicenseData "${SRC}\LICENSE.txt"

Section "Switchboard"
  SetShellVarContext current
  SetOutPath "$INSTDIR"
  File "${SRC}\switchboard.exe"
  File "${SRC}\switchboard-connect.exe"
  File "${SRC}\LICENSE.txt"
  WriteUninstaller "$INSTDIR\uninstall.exe"
  CreateShortcut "$SMPROGRAMS\Switchboard.lnk" "$INSTDIR\switchboard.exe" "" "$INSTDIR\switchboard.exe" 0
  WriteRegStr HKCU "${UNINSTKEY}" "DisplayName" "Switchboard"
  WriteRegStr HKCU "${UNINSTKEY}" "DisplayVersion" "${VERSION}"
  WriteRegStr HKCU "${UNINSTKEY}" "Publisher" "The Switchboard authors"
  WriteRegStr HKCU "${UNINSTKEY}" "DisplayIcon" "$INSTDIR\switchboard.exe"
  WriteRegStr HKCU "${UNINSTKEY}" "InstallLocation" "$INSTDIR"
  WriteRegStr HKCU "${UNINSTKEY}" "UninstallString" '"$INSTDIR\uninstall.exe"'
  WriteRegStr HKCU "${UNINSTKEY}" "QuietUninstallString" '"$INSTDIR\uninstall.exe" /S'
  WriteRegDWORD HKCU "${UNINSTKEY}" "NoModify" 1
  WriteRegDWORD HKCU "${UNINSTKEY}" "NoRepair" 1
SectionEnd

Section "Uninstall"
  SetShellVarContext current
  ; Start at login points at the binary that is going away.
  DeleteRegValue HKCU "${RUNKEY}" "Switchboard"
  Delete "$SMPROGRAMS\Switchboard.lnk"
  Delete "$INSTDIR\switchboard.exe"
  Delete "$INSTDIR\switchboard-connect.exe"
  Delete "$INSTDIR\LICENSE.txt"
  Delete "$INSTDIR\uninstall.exe"
  RMDir "$INSTDIR"
  DeleteRegKey HKCU "${UNINSTKEY}"
  ; The user's config (%APPDATA%\switchboard) and history
  ; (%LOCALAPPDATA%\switchboard) are theirs.
SectionEnd
